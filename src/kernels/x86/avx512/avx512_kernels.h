// Entry points of the AVX-512 kernels (files *_avx512.cpp, *_avx512bf16.cpp; no tiles, so also for
// AVX-512 CPUs without AMX), gathered in matmul/kernel_table.cpp. Call only when use_avx512() (the
// BF16 ones only when use_avx512_bf16()). Internal to src/kernels.
// Contracts as DotRowsFn, DotOutputsFn, DotTileFn and QuantizeActFn (row_kernels.h).
#pragma once
#include <cstdint>

namespace infer::kernels::avx512 {

void dot_outputs_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out);
void dot_outputs_interleaved_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out);
void dot_outputs_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out);

// The interleaved layout's batch kernels: dot_rows_interleaved_* meet the units as they lie, 8 rows a
// pass; dot_tile_vnni_interleaved_* unpack each group once for all the rows (larger batches; where
// each takes over: matmul/batch_rows.h). Both take any row count and give the same bits.
void dot_rows_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_rows_interleaved_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_rows_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_vnni_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_vnni_interleaved_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_vnni_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

// Q8_0 / Q4_0 weights × BlockQ8_0F activations in the interleaved layout (q8_0_q4_0_interleaved_avx512.cpp).
void dot_outputs_interleaved_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out);
void dot_outputs_interleaved_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out);
void dot_rows_interleaved_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_rows_interleaved_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

// Q8_0 / Q4_0 / Q5_0 weights × BlockQ8_0F activations (Q5_1: BlockQ8_1F), the row layout's batch
// tile (q8_0_q4_0_q5_0_q5_1_avx512.cpp).
void dot_tile_vnni_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_vnni_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_vnni_q5_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_vnni_q5_1(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
// The same tile over the interleaved layout (n_w a multiple of 16), for more rows than one pass of the
// interleaved rows kernel.
void dot_tile_vnni_interleaved_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_vnni_interleaved_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

// BF16 weights × BF16 activations by VDPBF16PS (float_rows_avx512bf16.cpp): a whole kernel set.
void dot_rows_bf16(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride);
void dot_outputs_bf16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out);
void dot_tile_bf16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, uint64_t act_stride,
                   int n_rows, float* out, int64_t out_stride);
void quantize_act_bf16(const float* src, void* dst, int64_t n);

// F32, F16, BF16 weights × the AVX2 set's f32 activation rows, on 512-bit FMAs (float_rows_avx512.cpp):
// the batch tile only, bitwise the AVX2 set's values. Pays only where use_avx512_fma_tiles().
void dot_tile_fma_f32(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                      uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_fma_f16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                      uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_fma_bf16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

// The same values on 256-bit FMAs with AVX-512VL's 32 registers (float_rows_avx512.cpp), for CPUs that
// split 512-bit FMAs (!use_avx512_fma_tiles()).
void dot_tile_fma256_f32(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                         uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_fma256_f16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                         uint64_t act_stride, int n_rows, float* out, int64_t out_stride);
void dot_tile_fma256_bf16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                          uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

// Time of a run of 512-bit FMAs over the same number of 256-bit ones, all independent (rate_probes_avx512.cpp):
// about 1 where the CPU runs 512-bit FMAs at full width, about 2 where it splits them. Takes about a
// millisecond.
double fma512_time_ratio();

// This core's peak int8 multiply-adds a second: VPDPBUSD on 512-bit vectors, all independent
// (rate_probes_avx512.cpp). Takes a few milliseconds.
double vnni_macs_per_second();

}  // namespace infer::kernels::avx512
