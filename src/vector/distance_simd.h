// Dot products and Hamming distances of stored vectors, in a scalar reference (encoded_vectors.cpp) and
// an AVX2/FMA/POPCNT version (distance_avx2.cpp, only called when the CPU has AVX2 and FMA, which implies
// POPCNT). Internal to src/vector; quant.h's distance_fn() picks one. Explicit dispatch rather than
// target_clones: ifunc resolvers run before the sanitizer runtimes start and crash TSan builds.
#pragma once
#include <cstddef>
#include <cstdint>

namespace infer::vector {

namespace reference {
int32_t dot_i8(const int8_t* a, const int8_t* b, size_t dim);
float dot_f32(const float* a, const float* b, size_t dim);
uint32_t hamming(const uint8_t* a, const uint8_t* b, size_t n_bytes);
}  // namespace reference

namespace avx2 {
int32_t dot_i8(const int8_t* a, const int8_t* b, size_t dim);
float dot_f32(const float* a, const float* b, size_t dim);
uint32_t hamming(const uint8_t* a, const uint8_t* b, size_t n_bytes);
}  // namespace avx2

// True when this CPU can run the avx2:: functions.
bool cpu_has_avx2_fma();

}  // namespace infer::vector
