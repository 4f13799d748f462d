// Entry points of the AMX tile kernels and the AVX-512 kernels of the interleaved layout (files
// *_amx.cpp), gathered by row_kernels_amx.cpp. Tile kernels (dot_tile_*, and dot_rows_interleaved_q4_k,
// which takes the AMX planes for 12-16 rows) only when use_amx(); the others when use_avx512().
// Internal to src/kernels.
// Contracts as DotTileFn and DotOutputsFn (row_kernels.h).
#pragma once
#include <cstdint>

namespace infer::kernels::amx {

void dot_tile_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

void dot_tile_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_outputs_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out);
void dot_outputs_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out);

void dot_rows_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
// AVX-512 VNNI only (no tiles, no planes): for CPUs without AMX.
void dot_rows_interleaved_vnni_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_rows_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

}  // namespace infer::kernels::amx
