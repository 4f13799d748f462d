// AVX2/FMA/F16C versions of the ops in ops.h. Defined in the *_avx2.cpp files (compiled with those
// flags); callers reach them only through the dispatching functions in ops.h, after use_avx2().
#pragma once
#include <cstdint>

#include "kernels/ops/ops.h"

namespace infer::kernels {

void rmsnorm_avx2(const float* x, const float* w, float* out, int64_t n, float eps);
void rope_apply_avx2(float* head, const float* cos, const float* sin, const RopeParams& p);
void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n);
void softmax_avx2(float* x, int64_t n);
// `table`: the GELU table (gelu.cpp) with one entry of padding after its 65,536.
void gelu_avx2(const uint16_t* table, const float* x, float* out, int64_t n);
void geglu_avx2(const uint16_t* table, const float* gate, const float* up, float* out, int64_t n);
void attention_row_avx2(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                        float scale, float* out, float* scratch);
void attention_rows_avx2(const AttentionRows& rows, const PagedKv& kv, int n_gqa, int head_dim, float scale,
                         float* scratch);
// q8_0_scores_ref (ops.h) by the block kernel's steps; `scores` holds n_gqa · n_keys + 7 floats.
void q8_0_scores_avx2(const float* q, const PagedKv& head, int n_keys, int n_gqa, int head_dim, float scale,
                      float* scores);
// One F16 K and V row of kv_dim elements at kd and vd.
void kv_store_avx2(const float* k, const float* v, uint16_t* kd, uint16_t* vd, int kv_dim);
// One of kv_store_ref's Q8_0 rows (quantize_row) of n elements at dst, bit for bit; n a multiple of 32.
void kv_store_q8_0_row_avx2(const float* x, uint16_t* dst, int n);
// The same for Q4_0 rows.
void kv_store_q4_0_row_avx2(const float* x, uint16_t* dst, int n);

}  // namespace infer::kernels
