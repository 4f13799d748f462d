// Writes one token's K and V rows into its page: F16 (round to nearest even) or Q8_0 / Q4_0 blocks.
#include <vector>

#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/key_lanes.h"
#include "kernels/ops/ops.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/quant/quant.h"

namespace infer::kernels {
namespace {

int64_t row_at(int64_t page_stride, int64_t row_stride, int page_tokens, const int32_t* page_table, int pos) {
  return static_cast<int64_t>(page_table[pos / page_tokens]) * page_stride + static_cast<int64_t>(pos % page_tokens) * row_stride;
}

TensorType block_type(KvType t) { return t == KvType::Q8_0 ? TensorType::Q8_0 : TensorType::Q4_0; }

// Keys in lanes (key_lanes.h): the row quantised by `quantise` (GGUF's blocks of `type`) and spread
// into token pos's lanes of its page.
template <class Quantise>
void store_key_row(KvType type, const float* k, uint16_t* k_base, int64_t page_stride, int page_tokens,
                   const int32_t* page_table, int kv_dim, int head_dim, int pos, Quantise&& quantise) {
  constexpr int kStackHalves = 4096;  // Q8_0 rows up to 7,710 elements without a heap allocation
  const int64_t halves = kv_row_halves(type, kv_dim);
  uint16_t stack[kStackHalves];
  std::vector<uint16_t> heap(halves > kStackHalves ? size_t(halves) : 0);
  uint16_t* blocks = halves > kStackHalves ? heap.data() : stack;
  quantise(k, blocks);
  store_key_lanes(type, blocks, kv_dim / kKvBlockElements, head_dim / kKvBlockElements, k_base + int64_t(page_table[pos / page_tokens]) * page_stride,
                  page_tokens, pos % page_tokens);
}

}  // namespace

void kv_store_ref(const float* k, const float* v, KvType type, uint16_t* k_base, uint16_t* v_base,
                  int64_t page_stride, int64_t row_stride, int page_tokens, const int32_t* page_table, int kv_dim,
                  int head_dim, int pos) {
  const int64_t at = row_at(page_stride, row_stride, page_tokens, page_table, pos);
  if (type != KvType::F16) {
    if (keys_in_lanes(type, head_dim)) {
      store_key_row(type, k, k_base, page_stride, page_tokens, page_table, kv_dim, head_dim, pos,
                    [&](const float* x, uint16_t* blocks) { quantize_row(block_type(type), x, blocks, kv_dim); });
    } else {
      quantize_row(block_type(type), k, k_base + at, kv_dim);
    }
    quantize_row(block_type(type), v, v_base + at, kv_dim);
    return;
  }
  for (int i = 0; i < kv_dim; ++i) {
    k_base[at + i] = f32_to_f16(k[i]);
    v_base[at + i] = f32_to_f16(v[i]);
  }
}

void kv_store(const float* k, const float* v, KvType type, uint16_t* k_base, uint16_t* v_base, int64_t page_stride,
              int64_t row_stride, int page_tokens, const int32_t* page_table, int kv_dim, int head_dim, int pos) {
  if (use_avx2()) {
    const int64_t at = row_at(page_stride, row_stride, page_tokens, page_table, pos);
    if (type == KvType::F16) {
      kv_store_avx2(k, v, k_base + at, v_base + at, kv_dim);
      return;
    }
    const auto row = type == KvType::Q8_0 ? kv_store_q8_0_row_avx2 : kv_store_q4_0_row_avx2;
    if (keys_in_lanes(type, head_dim)) {
      store_key_row(type, k, k_base, page_stride, page_tokens, page_table, kv_dim, head_dim, pos,
                    [&](const float* x, uint16_t* blocks) { row(x, blocks, kv_dim); });
    } else {
      row(k, k_base + at, kv_dim);
    }
    row(v, v_base + at, kv_dim);
  } else {
    kv_store_ref(k, v, type, k_base, v_base, page_stride, row_stride, page_tokens, page_table, kv_dim, head_dim, pos);
  }
}

}  // namespace infer::kernels
