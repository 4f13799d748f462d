// Entry points of the AVX-512 VNNI kernels of the interleaved layout (files *_avx512.cpp; no tiles,
// so also for AVX-512 CPUs without AMX), gathered by row_kernels_avx512.cpp. Call only when
// use_avx512(). Internal to src/kernels.
// Contracts as DotOutputsFn and DotTileFn (row_kernels.h).
#pragma once
#include <cstdint>

namespace infer::kernels::avx512 {

void dot_outputs_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out);
void dot_outputs_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out);

void dot_rows_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_rows_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

}  // namespace infer::kernels::avx512
