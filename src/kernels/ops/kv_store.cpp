// Writes one token's K and V rows into its page: F16 (round to nearest even) or Q8_0 / Q4_0 blocks.
#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/ops.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/quant/quant.h"

namespace infer::kernels {
namespace {

int64_t row_at(int64_t page_stride, int64_t row_stride, int page_tokens, const int32_t* page_table, int pos) {
  return static_cast<int64_t>(page_table[pos / page_tokens]) * page_stride + static_cast<int64_t>(pos % page_tokens) * row_stride;
}

TensorType block_type(KvType t) { return t == KvType::Q8_0 ? TensorType::Q8_0 : TensorType::Q4_0; }

}  // namespace

void kv_store_ref(const float* k, const float* v, KvType type, uint16_t* k_base, uint16_t* v_base,
                  int64_t page_stride, int64_t row_stride, int page_tokens, const int32_t* page_table, int kv_dim,
                  int pos) {
  const int64_t at = row_at(page_stride, row_stride, page_tokens, page_table, pos);
  if (type != KvType::F16) {
    quantize_row(block_type(type), k, k_base + at, kv_dim);
    quantize_row(block_type(type), v, v_base + at, kv_dim);
    return;
  }
  for (int i = 0; i < kv_dim; ++i) {
    k_base[at + i] = f32_to_f16(k[i]);
    v_base[at + i] = f32_to_f16(v[i]);
  }
}

void kv_store(const float* k, const float* v, KvType type, uint16_t* k_base, uint16_t* v_base, int64_t page_stride,
              int64_t row_stride, int page_tokens, const int32_t* page_table, int kv_dim, int pos) {
  if (type != KvType::Q4_0 && use_avx2()) {
    const int64_t at = row_at(page_stride, row_stride, page_tokens, page_table, pos);
    if (type == KvType::F16) {
      kv_store_avx2(k, v, k_base + at, v_base + at, kv_dim);
    } else {
      kv_store_q8_0_avx2(k, v, k_base + at, v_base + at, kv_dim);
    }
  } else {
    kv_store_ref(k, v, type, k_base, v_base, page_stride, row_stride, page_tokens, page_table, kv_dim, pos);
  }
}

}  // namespace infer::kernels
