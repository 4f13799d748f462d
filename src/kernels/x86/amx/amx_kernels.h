// Entry points of the AMX tile kernels (files *_amx.cpp), gathered in matmul/kernel_table.cpp.
// Call only when use_amx(). Internal to src/kernels.
// Contracts as DotTileFn (row_kernels.h).
#pragma once
#include <cstdint>

namespace infer::kernels::amx {

void dot_tile_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

void dot_tile_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

void dot_tile_interleaved_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_interleaved_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

// Mid-size batches over the interleaved layout on AMX planes: at most kTileActRows (16) rows (where
// they run: matmul/batch_rows.h).
void dot_planes_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                 uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

}  // namespace infer::kernels::amx
