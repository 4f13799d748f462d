// AVX2 attention of one query row. Same steps and key order as attention_row_ref; the F16 keys and
// values are widened with F16C. Per-element arithmetic depends only on head_dim and n_keys, never on
// which other rows or threads exist (invariant 7).
#include <immintrin.h>

#include <algorithm>

#include "kernels/ops_avx2.h"
#include "kernels/quant.h"
#include "kernels/vec_exp_avx2.h"

namespace infer::kernels {
namespace {

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

float dot_f32_f16(const float* q, const uint16_t* k, int n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int d = 0;
  for (; d + 32 <= n; d += 32) {
    for (int c = 0; c < 4; ++c) {
      acc[c] = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8 * c), load_f16x8(k + d + 8 * c), acc[c]);
    }
  }
  for (; d + 8 <= n; d += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load_f16x8(k + d), acc[0]);
  float sum = hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; d < n; ++d) sum += q[d] * f16_to_f32(k[d]);
  return sum;
}

// Calls fn(j, row) for keys j = 0..n_keys-1 in order, row pointing at the key's kv_dim-wide row.
template <typename Fn>
inline void for_each_key(const uint16_t* base, const PagedKv& kv, int n_keys, Fn&& fn) {
  int j = 0;
  for (int page_index = 0; j < n_keys; ++page_index) {
    const uint16_t* page = base + static_cast<int64_t>(kv.page_table[page_index]) * kv.page_stride;
    const int rows = std::min(kv.page_tokens, n_keys - j);
    for (int r = 0; r < rows; ++r, ++j) fn(j, page + static_cast<int64_t>(r) * kv.kv_dim);
  }
}

}  // namespace

void attention_row_avx2(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                        float scale, float* out, float* scratch) {
  const int n_gqa = n_head / n_kv_head;
  for (int h = 0; h < n_head; ++h) {
    const int64_t head_off = static_cast<int64_t>(h / n_gqa) * head_dim;
    const float* qh = q + static_cast<int64_t>(h) * head_dim;
    for_each_key(kv.k_base + head_off, kv, n_keys,
                 [&](int j, const uint16_t* k) { scratch[j] = dot_f32_f16(qh, k, head_dim) * scale; });
    softmax_avx2(scratch, n_keys);

    float* oh = out + static_cast<int64_t>(h) * head_dim;
    int d = 0;
    for (; d + 32 <= head_dim; d += 32) {
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
      for_each_key(kv.v_base + head_off + d, kv, n_keys, [&](int j, const uint16_t* v) {
        const __m256 p = _mm256_broadcast_ss(scratch + j);
        a0 = _mm256_fmadd_ps(p, load_f16x8(v), a0);
        a1 = _mm256_fmadd_ps(p, load_f16x8(v + 8), a1);
        a2 = _mm256_fmadd_ps(p, load_f16x8(v + 16), a2);
        a3 = _mm256_fmadd_ps(p, load_f16x8(v + 24), a3);
      });
      _mm256_storeu_ps(oh + d, a0);
      _mm256_storeu_ps(oh + d + 8, a1);
      _mm256_storeu_ps(oh + d + 16, a2);
      _mm256_storeu_ps(oh + d + 24, a3);
    }
    for (; d + 8 <= head_dim; d += 8) {
      __m256 a = _mm256_setzero_ps();
      for_each_key(kv.v_base + head_off + d, kv, n_keys, [&](int j, const uint16_t* v) {
        a = _mm256_fmadd_ps(_mm256_broadcast_ss(scratch + j), load_f16x8(v), a);
      });
      _mm256_storeu_ps(oh + d, a);
    }
    for (; d < head_dim; ++d) {
      float a = 0.f;
      for_each_key(kv.v_base + head_off + d, kv, n_keys,
                   [&](int j, const uint16_t* v) { a += scratch[j] * f16_to_f32(*v); });
      oh[d] = a;
    }
  }
}

}  // namespace infer::kernels
