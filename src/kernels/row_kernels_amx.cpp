// The AMX tile kernels per weight type, for the row and the interleaved layouts, and the interleaved
// layout's AVX-512 VNNI kernels (no tiles: also for AVX-512 CPUs without AMX, such as AMD's Zen 4/5).
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

InterleavedKernels avx512_interleaved_kernels(TensorType weight, bool tiles) {
  switch (weight) {
    case TensorType::Q4_K:
      return {amx::dot_outputs_interleaved_q4_k, tiles ? amx::dot_tile_interleaved_q4_k : nullptr,
              tiles ? amx::dot_rows_interleaved_q4_k : amx::dot_rows_interleaved_vnni_q4_k};
    case TensorType::Q6_K:
      return {amx::dot_outputs_interleaved_q6_k, tiles ? amx::dot_tile_interleaved_q6_k : nullptr,
              amx::dot_rows_interleaved_q6_k};
    default: return {};
  }
}

}  // namespace infer::kernels
