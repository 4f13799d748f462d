// The rows of the block formats the GPU reads in place (Q8_0, Q4_K, Q5_K, Q6_K), laid out so that each
// matmul lane's codes are one aligned 8-byte load: Q4_K and Q5_K as the file stores them, Q6_K blocks
// padded from 210 to 224 bytes, Q8_0 rows as all their codes and then all their f16 scales (row padded
// to 16 bytes). Host functions, free of CUDA headers: the backend lays rows out with them, and tests
// decode rows on the CPU with the kernel's own decoders (gpu_matmul.cu).
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
// A row in the GPU's layout decoded on the host exactly as the matmul's lanes decode it.
void decode_gpu_row(gguf::TensorType type, const uint8_t* gpu_row, int64_t n_in, float* out);

}  // namespace infer::cuda
