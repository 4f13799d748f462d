// The interleaved weight layout: matrices of some block formats are rewritten at load so that the
// AVX-512/AMX kernels read 16 weight rows with plain vector loads instead of gathers.
//
// Rows are taken in groups of kInterleaveRows = 16 (a group keeps the bytes its 16 rows had, so a
// matrix keeps its size and each group its place). Within a group, super-block i of the 16 rows is
// stored as one unit of 16 · block_bytes bytes: first, for each whole 4-byte word k of the block, the
// 64 bytes holding word k of rows 0..15 in row order; then the block's last block_bytes % 4 bytes of
// rows 0..15 (Q6_K: its f16 scale d). So the vector load at 64·k gives word k of all 16 rows, the
// lanes a gather over the rows would give. Rows past the last whole group stay in row layout.
#pragma once
#include <cstdint>

#include "kernels/matmul/matmul.h"
#include "kernels/quant/quant.h"

namespace infer::kernels {

inline constexpr int64_t kInterleaveRows = 16;

// Whether this CPU has kernels for the interleaved layout of `type` (Q8_0, Q4_0, Q4_K, Q5_K and Q6_K with
// AVX-512 VNNI).
bool interleaved_kernels_available(TensorType type);

// Rewrites the whole groups of an n_out × n_in matrix of `type` (row layout) in place into the
// interleaved layout; the tail rows are left as they are. Throws std::invalid_argument when `type`
// has blocks shorter than 4 bytes.
void interleave_rows(TensorType type, uint8_t* data, int64_t n_in, int64_t n_out);

// Copies row `row` of an interleaved matrix back into row layout (row_bytes bytes at `out`).
void deinterleave_row(TensorType type, const uint8_t* data, int64_t n_in, int64_t n_out, int64_t row, uint8_t* out);

// Row `row` of w as n_in floats, whichever layout w has (embedding lookups).
void dequantize_weight_row(const WeightMatrix& w, int64_t row, float* dst);

}  // namespace infer::kernels
