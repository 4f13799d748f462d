// Run-time choice between the scalar, AVX2, AVX-512 and AMX row kernels.
#include "kernels/matmul/row_kernels.h"

#include <array>

#include "kernels/runtime/cpu_features.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels {

namespace {
template <float (*Dot)(const void*, const void*, int64_t)>
void scalar_dot_rows(int64_t n, const void* w_row, const uint8_t* act, uint64_t act_stride, int n_rows,
                     float* out, int64_t out_stride) {
  for (int r = 0; r < n_rows; ++r) out[r * out_stride] = Dot(w_row, act + r * act_stride, n);
}

void copy_f32(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(dst)[i] = src[i];
}
}  // namespace

RowKernels scalar_row_kernels(TensorType weight) {
  const TensorType a = activation_type(weight);  // throws for unsupported types
  RowKernels k{nullptr, nullptr, block_elements(a), block_bytes(a)};
  switch (weight) {
    case TensorType::F32: k.dot_rows = scalar_dot_rows<ref::dot_f32>; k.quantize_act = copy_f32; break;
    case TensorType::F16: k.dot_rows = scalar_dot_rows<ref::dot_f16>; k.quantize_act = ref::quantize_f16; break;
    case TensorType::BF16: k.dot_rows = scalar_dot_rows<ref::dot_bf16>; k.quantize_act = ref::quantize_bf16; break;
    case TensorType::Q8_0: k.dot_rows = scalar_dot_rows<ref::dot_q8_0>; k.quantize_act = ref::quantize_q8_0_activation; break;
    case TensorType::Q4_0: k.dot_rows = scalar_dot_rows<ref::dot_q4_0>; k.quantize_act = ref::quantize_q8_0_activation; break;
    case TensorType::Q5_0: k.dot_rows = scalar_dot_rows<ref::dot_q5_0>; k.quantize_act = ref::quantize_q8_0_activation; break;
    case TensorType::Q5_1: k.dot_rows = scalar_dot_rows<ref::dot_q5_1>; k.quantize_act = ref::quantize_q8_0_activation; break;
    case TensorType::Q4_K: k.dot_rows = scalar_dot_rows<ref::dot_q4_k>; k.quantize_act = ref::quantize_q8_k; break;
    case TensorType::Q5_K: k.dot_rows = scalar_dot_rows<ref::dot_q5_k>; k.quantize_act = ref::quantize_q8_k; break;
    case TensorType::Q6_K: k.dot_rows = scalar_dot_rows<ref::dot_q6_k>; k.quantize_act = ref::quantize_q8_k; break;
    default: break;
  }
  return k;
}

namespace {
RowKernels choose(TensorType weight) {
  if (use_amx_bf16()) {
    if (const RowKernels tiles = amx_bf16_row_kernels(weight); tiles.dot_rows) return tiles;
  }
  RowKernels k = scalar_row_kernels(weight);
  if (use_avx2()) {
    const RowKernels fast = avx2_row_kernels(weight);
    if (fast.dot_rows) k.dot_rows = fast.dot_rows;
    // dot_outputs reads the blocks dot_rows reads: the fast quantiser's, or the reference's where
    // the set has none (F32, BF16: the same bytes)
    if (fast.dot_rows) k.dot_outputs = fast.dot_outputs;
    k.dot_tile = fast.dot_tile;  // reads the same activation blocks as fast.dot_rows
    if (use_avx512() && fast.dot_rows) {  // the tiles read what fast.dot_rows reads
      if (use_amx() && amx_dot_tile(weight)) k.dot_tile = amx_dot_tile(weight);
      else if (DotTileFn wide = avx512_dot_tile(weight)) k.dot_tile = wide;
    }
    if (use_avx512() && fast.dot_rows && fast.quantize_act) {
      const InterleavedKernels il = avx512_interleaved_kernels(weight, use_amx());
      k.dot_outputs_interleaved = il.dot_outputs;
      k.dot_tile_interleaved = il.dot_tile;
      k.dot_rows_interleaved = il.dot_rows;
    }
    if (fast.quantize_act) {  // the fast dot reads the fast quantiser's blocks
      k.quantize_act = fast.quantize_act;
      k.act_block_elements = fast.act_block_elements;
      k.act_block_bytes = fast.act_block_bytes;
    }
  }
  if (use_avx512_bf16()) {
    if (const RowKernels bf16 = avx512_bf16_row_kernels(weight); bf16.dot_rows) return bf16;
  }
  return k;
}

constexpr uint32_t kTypeIds = 64;  // above every ggml type id (spec §2)
}  // namespace

RowKernels row_kernels(TensorType weight) {
  // Chosen once per type: matmul asks on every call, and a decode step makes hundreds of calls.
  static const auto table = [] {
    std::array<RowKernels, kTypeIds> t{};
    for (uint32_t id = 0; id < kTypeIds; ++id) {
      if (is_supported_weight_type(static_cast<TensorType>(id))) t[id] = choose(static_cast<TensorType>(id));
    }
    return t;
  }();
  const auto id = static_cast<uint32_t>(weight);
  if (id >= kTypeIds || !table[id].dot_rows) return scalar_row_kernels(weight);  // throws: unsupported
  return table[id];
}

}  // namespace infer::kernels
