// Scalar reference implementations, one set per block format (files q8_0.cpp, q4_0.cpp, q5_0.cpp, q5_1.cpp, q4_k.cpp,
// q5_k.cpp, q6_k.cpp, q8_k.cpp, float_rows.cpp). format_traits.cpp holds them by type.
// Internal to src/kernels. `n` is a count of elements, a multiple of the block size.
#pragma once
#include <cstdint>

namespace infer::kernels::ref {

// Round to nearest, ties to even (ggml's nearest_int; exact for |v| <= 2^22).
int nearest_int(float v);

void dequantize_q8_0(const void* src, float* dst, int64_t n);
void quantize_q8_0(const float* src, void* dst, int64_t n);  // weight rule: roundf, id = 1/d
// The activation rule of llama.cpp's x86 AVX/AVX2 build (§7.2): id = 127/amax, ties to even.
void quantize_q8_0_activation(const float* src, void* dst, int64_t n);
float dot_q8_0(const void* w, const void* act_q8_0, int64_t n);

void dequantize_q4_0(const void* src, float* dst, int64_t n);
void quantize_q4_0(const float* src, void* dst, int64_t n);
float dot_q4_0(const void* w, const void* act_q8_0, int64_t n);

void dequantize_q5_0(const void* src, float* dst, int64_t n);
void quantize_q5_0(const float* src, void* dst, int64_t n);
float dot_q5_0(const void* w, const void* act_q8_0, int64_t n);

void dequantize_q5_1(const void* src, float* dst, int64_t n);
void quantize_q5_1(const float* src, void* dst, int64_t n);
float dot_q5_1(const void* w, const void* act_q8_0, int64_t n);

void dequantize_q8_k(const void* src, float* dst, int64_t n);
void quantize_q8_k(const float* src, void* dst, int64_t n);

void dequantize_q4_k(const void* src, float* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
float dot_q4_k(const void* w, const void* act_q8_k, int64_t n);

void dequantize_q5_k(const void* src, float* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
float dot_q5_k(const void* w, const void* act_q8_k, int64_t n);

void dequantize_q6_k(const void* src, float* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);
float dot_q6_k(const void* w, const void* act_q8_k, int64_t n);

// Plain float rows. Dot products accumulate in double, in element order.
void dequantize_f16(const void* src, float* dst, int64_t n);
void quantize_f16(const float* src, void* dst, int64_t n);
void dequantize_bf16(const void* src, float* dst, int64_t n);
void quantize_bf16(const float* src, void* dst, int64_t n);
float dot_f32(const void* w, const void* act_f32, int64_t n);
float dot_f16(const void* w, const void* act_f16, int64_t n);
float dot_bf16(const void* w, const void* act_bf16, int64_t n);

}  // namespace infer::kernels::ref
