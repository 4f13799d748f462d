// The AVX2 kernel set per weight type.
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/quant/blocks.h"
#include "kernels/matmul/row_kernels.h"

namespace infer::kernels {

RowKernels avx2_row_kernels(TensorType weight) {
  switch (weight) {
    case TensorType::F32: return {avx2::dot_rows_f32, nullptr, 1, 4, avx2::dot_outputs_f32, avx2::dot_tile_f32};
    case TensorType::F16: return {avx2::dot_rows_f16, avx2::quantize_act_f16_as_f32, 1, 4, avx2::dot_outputs_f16,
                                    avx2::dot_tile_f16};
    case TensorType::BF16: return {avx2::dot_rows_bf16, avx2::quantize_act_bf16_as_f32, 1, 4, avx2::dot_outputs_bf16,
                                     avx2::dot_tile_bf16};
    case TensorType::Q8_0:
      return {avx2::dot_rows_q8_0, avx2::quantize_act_q8_0f, kQK0, sizeof(BlockQ8_0F), avx2::dot_outputs_q8_0,
              avx2::dot_tile_q8_0};
    case TensorType::Q4_0:
      return {avx2::dot_rows_q4_0, avx2::quantize_act_q8_0f, kQK0, sizeof(BlockQ8_0F), avx2::dot_outputs_q4_0,
              avx2::dot_tile_q4_0};
    case TensorType::Q5_0:
      return {avx2::dot_rows_q5_0, avx2::quantize_act_q8_0f, kQK0, sizeof(BlockQ8_0F), avx2::dot_outputs_q5_0,
              avx2::dot_tile_q5_0};
    case TensorType::Q5_1:
      return {avx2::dot_rows_q5_1, avx2::quantize_act_q8_1f, kQK0, sizeof(BlockQ8_1F), avx2::dot_outputs_q5_1,
              avx2::dot_tile_q5_1};
    case TensorType::Q4_K:
      return {avx2::dot_rows_q4_k, avx2::quantize_act_q8_k, kQKK, sizeof(BlockQ8_K), avx2::dot_outputs_q4_k,
              avx2::dot_tile_q4_k};
    case TensorType::Q5_K:
      return {avx2::dot_rows_q5_k, avx2::quantize_act_q8_k, kQKK, sizeof(BlockQ8_K), nullptr, avx2::dot_tile_q5_k};
    case TensorType::Q6_K:
      return {avx2::dot_rows_q6_k, avx2::quantize_act_q8_k, kQKK, sizeof(BlockQ8_K), avx2::dot_outputs_q6_k,
              avx2::dot_tile_q6_k};
    default: return {nullptr, nullptr, 1, 0};
  }
}

}  // namespace infer::kernels
