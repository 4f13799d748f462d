// REDUCE: a fixed random projection from `input_dim` to `dim` components, applied to every vector a
// set receives (VADD and VSIM queries) before normalising and encoding.
//
// Entry (r, c) is ±1/√dim with sign H(r, c)·s(c): H is the Sylvester–Hadamard pattern (-1)^popcount(r & c)
// and s a pseudo-random ±1 per column from a fixed seed. The rows are orthogonal when input_dim is a power
// of two, and the matrix depends only on (input_dim, dim), so masters, replicas and a restarted server
// build the same one. It is still saved with the set (serialize.h), so a set keeps its projection even if
// this recipe ever changes.
#pragma once
#include <cstdint>
#include <vector>

namespace infer::vector {

// The dim × input_dim matrix, row-major.
std::vector<float> make_projection(uint32_t input_dim, uint32_t dim);

// y[r] = Σ_c m[r·input_dim + c]·x[c] for r < dim. No allocation.
void project(const std::vector<float>& m, uint32_t input_dim, uint32_t dim, const float* x, float* y);

}  // namespace infer::vector
