// The AMX tile kernel per weight type, for the row layout.
#include "kernels/x86/amx/amx_kernels.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/matmul/row_kernels.h"

namespace infer::kernels {

DotTileFn amx_dot_tile(TensorType weight) {
  switch (weight) {
    case TensorType::Q8_0: return amx::dot_tile_q8_0;
    case TensorType::Q4_0: return amx::dot_tile_q4_0;
    case TensorType::Q4_K: return amx::dot_tile_q4_k;
    case TensorType::Q6_K: return amx::dot_tile_q6_k;
    case TensorType::BF16: return use_amx_bf16() ? amx_bf16_row_kernels(weight).dot_tile : nullptr;
    default: return nullptr;
  }
}

}  // namespace infer::kernels
