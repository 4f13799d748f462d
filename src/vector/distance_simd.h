// Dot products of stored vectors, in a scalar reference (quant.cpp) and an AVX2/FMA version
// (distance_avx2.cpp, only called when the CPU has AVX2 and FMA). Internal to src/vector; quant.h's
// distance_fn() picks one.
#pragma once
#include <cstddef>
#include <cstdint>

namespace infer::vector {

namespace reference {
int32_t dot_i8(const int8_t* a, const int8_t* b, size_t dim);
float dot_f32(const float* a, const float* b, size_t dim);
}  // namespace reference

namespace avx2 {
int32_t dot_i8(const int8_t* a, const int8_t* b, size_t dim);
float dot_f32(const float* a, const float* b, size_t dim);
}  // namespace avx2

// True when this CPU can run the avx2:: functions.
bool cpu_has_avx2_fma();

}  // namespace infer::vector
