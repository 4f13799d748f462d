// Entry points of the AVX2 kernels (files *_avx2.cpp), gathered in matmul/kernel_table.cpp.
// Call only when use_avx2(). Internal to src/kernels. Contracts as DotRowsFn / QuantizeActFn.
#pragma once
#include <cstdint>

namespace infer::kernels::avx2 {

#define INFER_AVX2_DOT_ROWS(name)                                                                    \
  void name(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out, \
            int64_t out_stride)
INFER_AVX2_DOT_ROWS(dot_rows_q8_0);
INFER_AVX2_DOT_ROWS(dot_rows_q4_0);
INFER_AVX2_DOT_ROWS(dot_rows_q5_0);
INFER_AVX2_DOT_ROWS(dot_rows_q5_1);
INFER_AVX2_DOT_ROWS(dot_rows_q4_k);
INFER_AVX2_DOT_ROWS(dot_rows_q5_k);
INFER_AVX2_DOT_ROWS(dot_rows_q6_k);
INFER_AVX2_DOT_ROWS(dot_rows_f32);
INFER_AVX2_DOT_ROWS(dot_rows_f16);
INFER_AVX2_DOT_ROWS(dot_rows_bf16);
#undef INFER_AVX2_DOT_ROWS
// Contract as DotOutputsFn.
void dot_outputs_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);
void dot_outputs_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);
void dot_outputs_q5_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);
void dot_outputs_q5_1(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);
void dot_outputs_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);
void dot_outputs_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);
void dot_outputs_f32(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);
void dot_outputs_f16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);
void dot_outputs_bf16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);

// Contract as DotTileFn: the batch kernels (register tiles over several activation rows).
#define INFER_AVX2_DOT_TILE(name)                                                                          \
  void name(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, uint64_t act_stride, \
            int n_rows, float* out, int64_t out_stride)
INFER_AVX2_DOT_TILE(dot_tile_f32);
INFER_AVX2_DOT_TILE(dot_tile_f16);
INFER_AVX2_DOT_TILE(dot_tile_bf16);
INFER_AVX2_DOT_TILE(dot_tile_q8_0);
INFER_AVX2_DOT_TILE(dot_tile_q4_0);
INFER_AVX2_DOT_TILE(dot_tile_q5_0);
INFER_AVX2_DOT_TILE(dot_tile_q5_1);
INFER_AVX2_DOT_TILE(dot_tile_q4_k);
INFER_AVX2_DOT_TILE(dot_tile_q5_k);
INFER_AVX2_DOT_TILE(dot_tile_q6_k);
#undef INFER_AVX2_DOT_TILE

// Q8_0 codes and scales, written as BlockQ8_0F.
void quantize_act_q8_0f(const float* src, void* dst, int64_t n);
// The same codes and scales with their sum, written as BlockQ8_1F (Q5_1's activations).
void quantize_act_q8_1f(const float* src, void* dst, int64_t n);
void quantize_act_q8_k(const float* src, void* dst, int64_t n);
// Activations rounded to F16 / BF16 as the references round them, each value written as an f32. BF16
// rows are stored in steps of kBf16ActStep values, each its even elements then its odd ones (the
// order the BF16 dot products widen weights in); the tail after the last full step in element order.
inline constexpr int64_t kBf16ActStep = 16;
void quantize_act_f16_as_f32(const float* src, void* dst, int64_t n);
void quantize_act_bf16_as_f32(const float* src, void* dst, int64_t n);

}  // namespace infer::kernels::avx2
