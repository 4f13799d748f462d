// AVX2 attention of one query row. Same steps and key order as attention_row_ref; the F16 keys and
// values are widened with F16C. Per-element arithmetic depends only on head_dim and n_keys, never on
// which other rows or threads exist (invariant 7).
#include <immintrin.h>

#include <algorithm>

#include "kernels/key_rows.h"
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

// Calls fn(j, row) for keys j = 0..n_keys-1 (key kv.first_key + j) in order, row pointing at the key's `row_halves`-long
// slice of its kv_dim-wide row. Rows a few keys ahead are prefetched: they are strided and, across
// pages, scattered, which the hardware prefetcher does not follow.
template <typename Fn>
inline void for_each_key(const uint16_t* base, const PagedKv& kv, int n_keys, int row_halves, Fn&& fn) {
  constexpr int kAhead = 4;
  for (int j = 0; j < std::min(kAhead, n_keys); ++j) {
    const char* p = reinterpret_cast<const char*>(key_row(base, kv, j));
    for (int b = 0; b < row_halves * 2; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
  }
  int j = 0;
  int first_row = kv.first_key % kv.page_tokens;
  for (int page_index = kv.first_key / kv.page_tokens; j < n_keys; ++page_index, first_row = 0) {
    const uint16_t* page = base + static_cast<int64_t>(kv.page_table[page_index]) * kv.page_stride;
    const int rows = std::min(kv.page_tokens - first_row, n_keys - j);
    for (int r = first_row; r < first_row + rows; ++r, ++j) {
      if (j + kAhead < n_keys) {
        const char* p = reinterpret_cast<const char*>(key_row(base, kv, j + kAhead));
        for (int b = 0; b < row_halves * 2; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
      }
      fn(j, page + static_cast<int64_t>(r) * kv.kv_dim);
    }
  }
}

// Dots of one query head with 8 keys at once (n a multiple of 8): an FMA chain per key over the
// 8-wide chunks, then one add tree leaves the 8 sums in one vector. Every lane goes through the same
// arithmetic, so a key's score does not depend on its place among the 8.
inline __m256 dot8_f32_f16(const float* q, const uint16_t* const* k, int n) {
  __m256 a[8];
  for (auto& x : a) x = _mm256_setzero_ps();
  for (int d = 0; d < n; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(qv, load_f16x8(k[i] + d), a[i]);
  }
  // hadd(a, b) = [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]
  const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  // lane i of s0123 holds key i's elements 0..3 (low half) and 4..7 (high half); likewise keys 4..7.
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// scores[h * n_keys + j] = (q_h · k_j) · scale for the n_gqa heads of one group, 8 keys at a time;
// the last group repeats its final key to fill the vector and keeps only the real lanes.
inline void scores_by_8(const float* qg, const uint16_t* k_base, const PagedKv& kv, int n_keys, int n_gqa,
                        int head_dim, float scale, float* scratch) {
  const __m256 sv = _mm256_set1_ps(scale);
  for (int j0 = 0; j0 < n_keys; j0 += 8) {
    const int m = std::min(8, n_keys - j0);
    const uint16_t* rows[8];
    for (int i = 0; i < 8; ++i) rows[i] = key_row(k_base, kv, j0 + std::min(i, m - 1));
    for (int j = j0 + 8; j < std::min(j0 + 16, n_keys); ++j) {  // the next group's rows
      const char* p = reinterpret_cast<const char*>(key_row(k_base, kv, j));
      for (int b = 0; b < head_dim * 2; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
    }
    for (int h = 0; h < n_gqa; ++h) {
      const __m256 sc = _mm256_mul_ps(dot8_f32_f16(qg + int64_t(h) * head_dim, rows, head_dim), sv);
      float* dst = scratch + int64_t(h) * n_keys + j0;
      if (m == 8) {
        _mm256_storeu_ps(dst, sc);
      } else {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, sc);
        for (int i = 0; i < m; ++i) dst[i] = lanes[i];
      }
    }
  }
}

// out_h[0..n) += p_h · v[0..n) for the n_gqa heads h of one KV group, with F16 v converted once for
// all of them. The accumulators live in `out` (L1), so each V row is consumed in one visit.
inline void accumulate_value(float* out, const float* p, int64_t p_stride, int n_gqa, const uint16_t* v, int n) {
  int d = 0;
  for (; d + 8 <= n; d += 8) {
    const __m256 vv = load_f16x8(v + d);
    for (int h = 0; h < n_gqa; ++h) {
      float* o = out + int64_t(h) * n + d;
      _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_broadcast_ss(p + h * p_stride), vv, _mm256_loadu_ps(o)));
    }
  }
  for (; d < n; ++d) {
    const float vf = f16_to_f32(v[d]);
    for (int h = 0; h < n_gqa; ++h) out[int64_t(h) * n + d] += p[h * p_stride] * vf;
  }
}

// accumulate_value for C = n_gqa · head_dim / 8 ≤ 8 chunks (head_dim a multiple of 8) with the
// outputs held in registers across the keys: the same multiply-adds in the same order, without a
// load and a store of each output chunk per key (short heads: bert's 32 and 64).
template <int C>
void accumulate_values_in_registers(float* og, const float* p, int n_keys, int head_dim, const uint16_t* v_base,
                                    const PagedKv& kv) {
  const int chunks = head_dim / 8;  // a head's
  const float* pc[C];                // chunk c's head's probabilities, and its place in the row
  int vc[C];
  for (int c = 0; c < C; ++c) {
    pc[c] = p + int64_t(c / chunks) * n_keys;
    vc[c] = (c % chunks) * 8;
  }
  __m256 acc[C];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for_each_key(v_base, kv, n_keys, head_dim, [&](int j, const uint16_t* v) {
    for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(_mm256_broadcast_ss(pc[c] + j), load_f16x8(v + vc[c]), acc[c]);
  });
  for (int c = 0; c < C; ++c) _mm256_storeu_ps(og + 8 * c, acc[c]);
}

// The values' pass of one KV group: outputs in registers where they fit, else in `og` (L1).
void accumulate_values(float* og, const float* p, int n_keys, int n_gqa, int head_dim, const uint16_t* v_base,
                       const PagedKv& kv) {
  if (head_dim % 8 == 0) {
    switch (n_gqa * head_dim / 8) {
      case 1: return accumulate_values_in_registers<1>(og, p, n_keys, head_dim, v_base, kv);
      case 2: return accumulate_values_in_registers<2>(og, p, n_keys, head_dim, v_base, kv);
      case 3: return accumulate_values_in_registers<3>(og, p, n_keys, head_dim, v_base, kv);
      case 4: return accumulate_values_in_registers<4>(og, p, n_keys, head_dim, v_base, kv);
      case 5: return accumulate_values_in_registers<5>(og, p, n_keys, head_dim, v_base, kv);
      case 6: return accumulate_values_in_registers<6>(og, p, n_keys, head_dim, v_base, kv);
      case 7: return accumulate_values_in_registers<7>(og, p, n_keys, head_dim, v_base, kv);
      case 8: return accumulate_values_in_registers<8>(og, p, n_keys, head_dim, v_base, kv);
      default: break;
    }
  }
  for (int64_t i = 0; i < int64_t(n_gqa) * head_dim; ++i) og[i] = 0.f;
  for_each_key(v_base, kv, n_keys, head_dim, [&](int j, const uint16_t* v) {
    accumulate_value(og, p + j, n_keys, n_gqa, v, head_dim);
  });
}

}  // namespace

// Heads that share a KV head (GQA) are processed together, key by key, so that each K and V row is
// read once per query row rather than once per head: at long contexts attention is memory-bound.
void attention_row_avx2(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                        float scale, float* out, float* scratch) {
  const int n_gqa = n_head / n_kv_head;
  for (int g = 0; g < n_kv_head; ++g) {
    const int64_t head_off = int64_t(g) * head_dim;
    const float* qg = q + int64_t(g) * n_gqa * head_dim;
    float* og = out + int64_t(g) * n_gqa * head_dim;
    if (head_dim % 8 == 0) {
      scores_by_8(qg, kv.k_base + head_off, kv, n_keys, n_gqa, head_dim, scale, scratch);
    } else {
      for_each_key(kv.k_base + head_off, kv, n_keys, head_dim, [&](int j, const uint16_t* k) {
        for (int h = 0; h < n_gqa; ++h) {
          scratch[int64_t(h) * n_keys + j] = dot_f32_f16(qg + int64_t(h) * head_dim, k, head_dim) * scale;
        }
      });
    }
    for (int h = 0; h < n_gqa; ++h) softmax_avx2(scratch + int64_t(h) * n_keys, n_keys);
    accumulate_values(og, scratch, n_keys, n_gqa, head_dim, kv.v_base + head_off, kv);
  }
}

}  // namespace infer::kernels
