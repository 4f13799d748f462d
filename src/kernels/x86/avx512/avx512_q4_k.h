// Q4_K's super-block steps on AVX-512 (Q5_K's too: the same scales, mins and float step), shared by
// the VNNI kernels (q4_k_q5_k_avx512.cpp) and Q4_K's tile kernels (q4_k_amx.cpp): the 16 rows' scales
// and mins decoded from their block words, and the float step that adds a super-block's exact integer
// sums, in the AVX2 kernels' order. Include only there.
#pragma once
#include "kernels/x86/avx512/avx512_common.h"

namespace infer::kernels::avx512 {
// Internal linkage, as avx512_common.h explains.
namespace {

constexpr int kSubLen = 32;
constexpr int kSubs = kQKK / kSubLen;  // 8
constexpr int64_t kQs = offsetof(BlockQ4_K, qs);

// Scales and mins of super-block i for the 16 rows. §5.1: w0 = sc0..3 (low 6 bits; top 2 bits extend
// sc4..7), w1 = m0..3 (top 2: m4..7), w2 = low nibbles sc4..7, high nibbles m4..7. Always inlined, as
// Q6_K's (avx512_q6_k.h): out of line, Q5_K's decode spent 5% of its time in the call (perf, infer bench).
template <class Source>
__attribute__((always_inline)) inline void decode_scales(const Source& src, int64_t i, __m512i* sc,
                                                         __m512i* min_pairs) {
  const __m512i low4 = _mm512_set1_epi32(0x0F), m6 = _mm512_set1_epi32(0x3F), m2 = _mm512_set1_epi32(0x03);
  const __m512i w0 = src.word(i, 4), w1 = src.word(i, 8), w2 = src.word(i, 12);
  __m512i m[kSubs];
  for (int j = 0; j < 4; ++j) {
    sc[j] = _mm512_and_si512(_mm512_srli_epi32(w0, 8 * j), m6);
    m[j] = _mm512_and_si512(_mm512_srli_epi32(w1, 8 * j), m6);
    const __m512i top_sc = _mm512_and_si512(_mm512_srli_epi32(w0, 8 * j + 6), m2);
    const __m512i top_m = _mm512_and_si512(_mm512_srli_epi32(w1, 8 * j + 6), m2);
    const __m512i nib = _mm512_srli_epi32(w2, 8 * j);
    sc[4 + j] = _mm512_or_si512(_mm512_and_si512(nib, low4), _mm512_slli_epi32(top_sc, 4));
    m[4 + j] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(nib, 4), low4), _mm512_slli_epi32(top_m, 4));
  }
  for (int p = 0; p < kSubs / 2; ++p) min_pairs[p] = _mm512_or_si512(m[2 * p], _mm512_slli_epi32(m[2 * p + 1], 16));
}

// The 16 rows' d and dmin of a super-block, as floats: converted once for all the activation rows.
struct BlockScales {
  __m512 d, dmin;
  BlockScales() = default;
  explicit BlockScales(__m512i dd) : d(low_halves_f32(dd)), dmin(high_halves_f32(dd)) {}  // dd: d | dmin << 16
};

// acc + (d·dy)·S − (dmin·dy)·M for the 16 rows, in the AVX2 kernels' order.
inline __m512 add_block(const BlockScales& b, __m512i s, __m512i mins, float dy, __m512 acc) {
  const __m512 dyv = _mm512_set1_ps(dy);
  acc = _mm512_fmadd_ps(_mm512_mul_ps(b.d, dyv), _mm512_cvtepi32_ps(s), acc);
  return _mm512_fnmadd_ps(_mm512_mul_ps(b.dmin, dyv), _mm512_cvtepi32_ps(mins), acc);
}

}  // namespace
}  // namespace infer::kernels::avx512
