// The interleaved layout's kernels per weight type: AVX-512 VNNI (also for AVX-512 CPUs without AMX,
// such as AMD's Zen 4/5), with the AMX tile kernels for batches when `tiles`.
#include "kernels/amx_kernels.h"
#include "kernels/avx512_kernels.h"
#include "kernels/row_kernels.h"

namespace infer::kernels {

InterleavedKernels avx512_interleaved_kernels(TensorType weight, bool tiles) {
  switch (weight) {
    case TensorType::Q4_K:
      return {avx512::dot_outputs_interleaved_q4_k, tiles ? amx::dot_tile_interleaved_q4_k : nullptr,
              tiles ? amx::dot_rows_interleaved_q4_k : avx512::dot_rows_interleaved_q4_k};
    case TensorType::Q6_K:
      return {avx512::dot_outputs_interleaved_q6_k, tiles ? amx::dot_tile_interleaved_q6_k : nullptr,
              avx512::dot_rows_interleaved_q6_k};
    default: return {};
  }
}

}  // namespace infer::kernels
