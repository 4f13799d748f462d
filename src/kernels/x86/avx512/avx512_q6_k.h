// Q6_K's super-block steps on AVX-512, shared by its VNNI kernels (q6_k_avx512.cpp) and its tile
// kernel (q6_k_amx.cpp): the 16 rows' codes and sub-block scales from their block words, and the float
// step that adds a super-block's exact integer sums, in the AVX2 kernels' order. Include only there.
//
// A super-block has 16 sub-blocks of 16 codes, each with a signed 8-bit scale. Element 128h + 32g + k
// (half h, group g, k < 32) is ql[64h + 32(g & 1) + k] >> 4(g >> 1) (low 4 bits) with
// (qh[32h + k] >> 2g) & 3 on top, and belongs to sub-block 8h + 2g + k/16. The codes are used unsigned
// (0..63) and the −32 offset is taken off as 32·Σ_s sc_s·bsums_s, which is exactly the AVX2 kernels'
// integer; the float step is theirs too (avx2_common.h, hsum_rows_i32), so every output is bitwise
// what they give.
#pragma once
#include "kernels/x86/avx512/avx512_common.h"

namespace infer::kernels::avx512 {
// Internal linkage, as avx512_common.h explains.
namespace {

constexpr int kSubLen = 16;
constexpr int kSubs = kQKK / kSubLen;  // 16
constexpr int64_t kQl = offsetof(BlockQ6_K, ql), kQh = offsetof(BlockQ6_K, qh), kScales = offsetof(BlockQ6_K, scales);

// The 16 rows' codes of group g (0..3) for words ql0/ql1 (ql bytes 64h + k, 64h + 32 + k) and qh
// (bytes 32h + k): bits 2g, 2g+1 of each qh byte moved to bits 4, 5 (what crosses bytes is masked off).
// kSelect: the low nibble and the moved bits joined by one ternary select (0xE4: m4 ? lo : hi) instead
// of an and and an or: faster where the codes' instructions dominate (decode), slower beside the
// VPDPBUSD of 8 rows (bench_kernels BM_MatmulBatch, Q6_K 1 and 8 rows; docs/performance.md, Constants).
template <bool kSelect = false>
inline __m512i codes(__m512i ql0, __m512i ql1, __m512i qh, int g) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2_at_4 = _mm512_set1_epi8(0x30);
  const __m512i ql = (g & 1) ? ql1 : ql0;
  const __m512i lo = g >> 1 ? _mm512_srli_epi32(ql, 4) : ql;  // the low 4 bits, other bits above them
  const __m512i moved = g <= 2 ? _mm512_slli_epi32(qh, 4 - 2 * g) : _mm512_srli_epi32(qh, 2);
  const __m512i hi = _mm512_and_si512(moved, m2_at_4);
  if constexpr (kSelect) return _mm512_ternarylogic_epi32(lo, hi, m4, 0xE4);
  return _mm512_or_si512(_mm512_and_si512(lo, m4), hi);
}

// The 16 sub-block scales of super-block i (sign-extended) and their int16 pairs (sc[2p], sc[2p+1]).
// Inlined: out of line its 24 vectors went through the stack, slowing Q6_K; Q4_K's gains nothing
// (BM_MatmulBatch; docs/performance.md, Constants).
template <class Source>
__attribute__((always_inline)) inline void decode_scales(const Source& src, int64_t i, __m512i* sc, __m512i* sc_pairs) {
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  for (int q = 0; q < 4; ++q) {
    const __m512i s4 = src.word(i, kScales + 4 * q);
    for (int b = 0; b < 4; ++b) sc[4 * q + b] = _mm512_srai_epi32(_mm512_slli_epi32(s4, 24 - 8 * b), 24);
  }
  for (int p = 0; p < kSubs / 2; ++p) {
    sc_pairs[p] = _mm512_or_si512(_mm512_and_si512(sc[2 * p], low16), _mm512_slli_epi32(sc[2 * p + 1], 16));
  }
}

// acc + (d·dy)·(S − 32·offset) for the 16 rows, in the AVX2 kernels' order. d: the rows' scales as
// floats, converted once for all the activation rows.
inline __m512 add_block(__m512 d, __m512i s, __m512i offset, float dy, __m512 acc) {
  const __m512i total = _mm512_sub_epi32(s, _mm512_slli_epi32(offset, 5));
  return _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dy)), _mm512_cvtepi32_ps(total), acc);
}

}  // namespace
}  // namespace infer::kernels::avx512
