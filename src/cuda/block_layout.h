// The rows of the block formats the GPU reads in place (Q8_0, Q4_K, Q5_K, Q6_K), laid out so that each
// matmul lane's codes are one aligned 8-byte load: Q4_K and Q5_K as the file stores them, Q6_K blocks
// padded from 210 to 224 bytes, Q8_0 rows as all their codes and then all their f16 scales (row padded
// to 16 bytes). Host functions, free of CUDA headers: the backend lays rows out with them, and tests
// run the matmul's own arithmetic on the CPU with them (gpu_matmul.cu).
#pragma once
#include <cstdint>

#include "gguf/tensor_type.h"

namespace infer::cuda {

// Whether `type` is one of the four block formats above.
bool has_block_layout(gguf::TensorType type);
// Bytes of one row of n_in weights in the GPU's layout.
int64_t gpu_block_row_bytes(gguf::TensorType type, int64_t n_in);
// The file's row rewritten in the GPU's layout (`out` holds gpu_block_row_bytes bytes).
void to_gpu_row(gguf::TensorType type, const uint8_t* file_row, int64_t n_in, uint8_t* out);
// n_in activations quantised on the host exactly as the GPU quantises them for weights of `type`:
// n_in int8 codes and n_in / 32 scales (Q8_0: one a 32-block; K-quants: Q8_K, one a 256 in the first
// n_in / 256 places). The same codes and scales as the CPU's quantize_activation_row.
void quantize_activations_as_gpu(gguf::TensorType type, const float* x, int64_t n_in, int8_t* codes, float* scales);
// One output of the GPU's matmul computed on the host with the kernel's own arithmetic and order:
// a row in the GPU's layout against activations from quantize_activations_as_gpu.
float dot_gpu_row(gguf::TensorType type, const uint8_t* gpu_row, int64_t n_in, const int8_t* codes, const float* scales);

}  // namespace infer::cuda
