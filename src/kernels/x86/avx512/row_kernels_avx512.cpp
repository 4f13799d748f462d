// The AVX-512 kernels per weight type (also for AVX-512 CPUs without AMX, such as AMD's Zen 4/5): the
// interleaved layout's VNNI kernels, with the AMX tile kernels for batches when `tiles`; the row
// layout's VNNI tile for Q8_0/Q4_0/Q5_0/Q5_1 and FMA tiles for float rows (512-bit where FMAs are full width,
// else 256-bit over 32 registers); the AVX-512 BF16 set of BF16 weights.
#include "kernels/x86/amx/amx_kernels.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/matmul/row_kernels.h"

namespace infer::kernels {

InterleavedKernels avx512_interleaved_kernels(TensorType weight, bool tiles) {
  switch (weight) {
    case TensorType::Q4_K:
      return {avx512::dot_outputs_interleaved_q4_k, tiles ? amx::dot_tile_interleaved_q4_k : nullptr,
              tiles ? amx::dot_rows_interleaved_q4_k : avx512::dot_rows_interleaved_q4_k};
    case TensorType::Q8_0:
      return {avx512::dot_outputs_interleaved_q8_0, tiles ? amx::dot_tile_interleaved_q8_0 : nullptr,
              avx512::dot_rows_interleaved_q8_0};
    case TensorType::Q4_0:
      return {avx512::dot_outputs_interleaved_q4_0, tiles ? amx::dot_tile_interleaved_q4_0 : nullptr,
              avx512::dot_rows_interleaved_q4_0};
    case TensorType::Q5_K:  // no AMX tiles: VNNI for every batch
      return {avx512::dot_outputs_interleaved_q5_k, nullptr, avx512::dot_rows_interleaved_q5_k};
    case TensorType::Q6_K:
      return {avx512::dot_outputs_interleaved_q6_k, tiles ? amx::dot_tile_interleaved_q6_k : nullptr,
              avx512::dot_rows_interleaved_q6_k};
    default: return {};
  }
}

DotTileFn avx512_dot_tile(TensorType weight) {
  switch (weight) {
    case TensorType::Q8_0: return avx512::dot_tile_vnni_q8_0;
    case TensorType::Q4_0: return avx512::dot_tile_vnni_q4_0;
    case TensorType::Q5_0: return avx512::dot_tile_vnni_q5_0;
    case TensorType::Q5_1: return avx512::dot_tile_vnni_q5_1;
    case TensorType::F32: return use_avx512_fma_tiles() ? avx512::dot_tile_fma_f32 : avx512::dot_tile_fma256_f32;
    case TensorType::F16: return use_avx512_fma_tiles() ? avx512::dot_tile_fma_f16 : avx512::dot_tile_fma256_f16;
    case TensorType::BF16: return use_avx512_fma_tiles() ? avx512::dot_tile_fma_bf16 : avx512::dot_tile_fma256_bf16;
    default: return nullptr;
  }
}

RowKernels avx512_bf16_row_kernels(TensorType weight) {
  if (weight != TensorType::BF16) return {nullptr, nullptr, 1, 1};
  RowKernels k{avx512::dot_rows_bf16, avx512::quantize_act_bf16, 1, 2};
  k.dot_outputs = avx512::dot_outputs_bf16;
  k.dot_tile = avx512::dot_tile_bf16;
  return k;
}

}  // namespace infer::kernels
