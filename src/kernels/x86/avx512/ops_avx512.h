// AVX-512 versions of some ops in ops.h. Defined in the *_avx512.cpp files (compiled with AVX-512
// flags); callers reach them only through the dispatching functions in ops.h, after use_avx512().
#pragma once

#include "kernels/ops/ops.h"

namespace infer::kernels {

// Bitwise softmax_avx2 (ops_avx2.h), 16 lanes wide.
void softmax_avx512(float* x, int64_t n);

// head_dim must satisfy attention_avx512_supports (64, 128 or 256).
bool attention_avx512_supports(int head_dim);
void attention_row_avx512(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                          float scale, float* out, float* scratch);
void attention_rows_avx512(const AttentionRows& rows, const PagedKv& kv, int n_gqa, int head_dim, float scale,
                           float* scratch);
// q8_0_scores_ref (ops.h) by the decode row kernel's steps; head_dim as above.
void q8_0_scores_avx512(const float* q, const PagedKv& head, int n_keys, int n_gqa, int head_dim, float scale,
                        float* scores);

}  // namespace infer::kernels
