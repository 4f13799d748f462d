// The AMX tile kernels per weight type, for the row and the interleaved layouts.
#include "kernels/amx_kernels.h"
#include "kernels/row_kernels.h"

namespace infer::kernels {

DotTileFn amx_dot_tile(TensorType weight) {
  switch (weight) {
    case TensorType::Q4_K: return amx::dot_tile_q4_k;
    case TensorType::Q6_K: return amx::dot_tile_q6_k;
    default: return nullptr;
  }
}

InterleavedKernels amx_interleaved_kernels(TensorType weight) {
  switch (weight) {
    case TensorType::Q4_K:
      return {amx::dot_outputs_interleaved_q4_k, amx::dot_tile_interleaved_q4_k, amx::dot_rows_interleaved_q4_k};
    case TensorType::Q6_K:
      return {amx::dot_outputs_interleaved_q6_k, amx::dot_tile_interleaved_q6_k, amx::dot_rows_interleaved_q6_k};
    default: return {};
  }
}

}  // namespace infer::kernels
