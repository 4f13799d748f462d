// The AVX2 batch tile of the K-quants (Q4_K and Q5_K: q4_k_q5_k_avx2.cpp; Q6_K: q6_k_avx2.cpp). Per
// tile of activation rows (kept in L2), each group of 8 weight rows is unpacked once per super-block
// into scratch: its 256 codes transposed to one row per 32-bit lane (vector v: codes 4v..4v+3 of the 8
// rows), its scales as int16 pairs per lane. One broadcast of 4 activation codes and one maddubs then
// serve 8 weight rows, and the scales are applied once per sub-block instead of once per 32 codes.
// The integer sums are exact and the float steps per super-block those of the row kernels
// (avx2_common.h, hsum_rows_i32), so every value is bitwise what dot_rows gives (invariant 7).
// Include only in *_avx2.cpp files; internal linkage, as tile_group.h explains.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/tile_group.h"
#include "kernels/x86/word_transpose.h"

namespace infer::kernels::avx2 {
namespace {

inline constexpr int kKGroupRows = 8;  // weight rows per group: one per 32-bit lane
inline constexpr int kKTileRows = 4;   // activation rows per pass over a group's scratch
// Code vectors whose maddubs sums add up in int16 before the madd with their scale: codes are at most
// 63, so 2 · 2·63·128 < 2^15; more (where the codes allow) spilled registers (bench_kernels
// BM_MatmulPrefill with INFER_NO_AVX512=1).
inline constexpr int kMaddVecs = 2;
// Activation rows per tile: about this many bytes of them, which stay in L2 while the groups pass.
inline constexpr uint64_t kKActTileBytes = 160 * 1024;

// One super-block of a group. kScales: the format's sub-blocks per super-block.
template <int kScales>
struct alignas(32) KGroupBlock {
  __m256i codes[64];        // vector v: the unsigned codes 4v..4v+3 of rows 0..7
  __m256i scales[kScales];  // sub-block j: lane r holds row r's scale as an int16 pair (s, s)
  __m256i offsets[8];       // pair p: lane r's int16 pair that multiplies the activation bsums 2p, 2p+1
  __m256 d, dmin;           // the rows' super-block scales (dmin: Q4_K, Q5_K)
};

// Four 32-bit words of each of 8 rows (rows[r]) side by side: words[i] lane r is row r's word i. For
// the formats' tile_scales, which decode the 8 rows' scales together.
inline void transpose_words4x8(const __m128i (&rows)[kKGroupRows], __m256i (&words)[4]) {
  __m256i pairs[4];  // rows i and i + 4, one per 128-bit lane
  for (int i = 0; i < 4; ++i) pairs[i] = _mm256_set_m128i(rows[i + 4], rows[i]);
  const __m256i lo01 = _mm256_unpacklo_epi32(pairs[0], pairs[1]), lo23 = _mm256_unpacklo_epi32(pairs[2], pairs[3]);
  const __m256i hi01 = _mm256_unpackhi_epi32(pairs[0], pairs[1]), hi23 = _mm256_unpackhi_epi32(pairs[2], pairs[3]);
  words[0] = _mm256_unpacklo_epi64(lo01, lo23);
  words[1] = _mm256_unpackhi_epi64(lo01, lo23);
  words[2] = _mm256_unpacklo_epi64(hi01, hi23);
  words[3] = _mm256_unpackhi_epi64(hi01, hi23);
}

// The int16 pair (lo, hi) in each 32-bit lane, from int32 lanes that fit 16 bits.
inline __m256i int16_pairs(__m256i lo, __m256i hi) {
  return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(hi, 16));
}

// A Format gives: Block; kTileMinRows, the fewest activation rows worth the unpacking (fewer take
// kRows, the format's row kernel); kScaleVecs, code vectors per sub-block;
// kMins: the offset term is dmin·Σ m·bsums taken off in float (Q4_K, Q5_K), else 32·Σ sc·bsums taken off
// the integer sum (Q6_K's −32); codes(block, v): the 256 codes in element order, 32 a vector;
// tile_scales(rows, b, group): the 8 rows' sub-block scales, the int16 pairs that multiply the bsums,
// d and dmin, a row per lane (decoded together: row by row in scalar code they were most of the
// unpacking at 8 rows, bench_kernels BM_MatmulBatch with INFER_NO_AVX512=1).
template <class F>
struct KTile {
  using Block = typename F::Block;
  static constexpr int kScales = 64 / F::kScaleVecs;
  using Group = KGroupBlock<kScales>;

  // Super-block b of rows x[0..7] into g.
  static void unpack(const Block* const (&x)[kKGroupRows], int64_t b, Group& g) {
    __m256i v[kKGroupRows][8];
    for (int r = 0; r < kKGroupRows; ++r) F::codes(x[r][b], v[r]);
    for (int s = 0; s < 8; ++s) {
      __m256i rows[kKGroupRows], words[8];
      for (int r = 0; r < kKGroupRows; ++r) rows[r] = v[r][s];
      transpose_words8(rows, words);
      for (int k = 0; k < 8; ++k) g.codes[8 * s + k] = words[k];
    }
    F::tile_scales(x, b, g);
  }

  // acc[r] plus super-block g's terms for activation blocks y[r] (lane i: weight row i).
  template <int NR>
  static void accumulate(const Group& g, const BlockQ8_K* const (&y)[NR], __m256 (&acc)[NR]) {
    __m256i isum[NR];
    for (int r = 0; r < NR; ++r) isum[r] = _mm256_setzero_si256();
    for (int u = 0; u < 64; u += kMaddVecs) {
      __m256i t[NR];
      for (int r = 0; r < NR; ++r) t[r] = _mm256_setzero_si256();
      for (int v = u; v < u + kMaddVecs; ++v) {
        const __m256i w = g.codes[v];
        for (int r = 0; r < NR; ++r) {
          const __m256i yv = _mm256_set1_epi32(load_word(y[r]->qs + 4 * v));
          t[r] = _mm256_add_epi16(t[r], _mm256_maddubs_epi16(w, yv));
        }
      }
      const __m256i s = g.scales[u / F::kScaleVecs];
      for (int r = 0; r < NR; ++r) isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(t[r], s));
    }
    for (int r = 0; r < NR; ++r) {
      __m256i o = _mm256_setzero_si256();
      for (int p = 0; p < 8; ++p) {
        o = _mm256_add_epi32(o, _mm256_madd_epi16(g.offsets[p], _mm256_set1_epi32(load_word(y[r]->bsums + 2 * p))));
      }
      const __m256 dy = _mm256_set1_ps(y[r]->d);
      if constexpr (F::kMins) {
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(g.d, dy), _mm256_cvtepi32_ps(isum[r]), acc[r]);
        acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(g.dmin, dy), _mm256_cvtepi32_ps(o), acc[r]);
      } else {
        const __m256i s = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(o, 5));
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(g.d, dy), _mm256_cvtepi32_ps(s), acc[r]);
      }
    }
  }

  // Activation rows a[0..NR) (act_stride apart) against the group in scratch g[0..nb); `count` of the
  // group's 8 lanes are real weight rows.
  template <int NR>
  static void tile_rows(const Group* g, int64_t nb, const uint8_t* a, uint64_t act_stride, int64_t count,
                        float* out, int64_t out_stride) {
    const BlockQ8_K* y0[NR];
    for (int r = 0; r < NR; ++r) y0[r] = reinterpret_cast<const BlockQ8_K*>(a + r * act_stride);
    __m256 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_K* y[NR];
      for (int r = 0; r < NR; ++r) y[r] = y0[r] + b;
      accumulate<NR>(g[b], y, acc);
    }
    for (int r = 0; r < NR; ++r) {
      float* o = out + r * out_stride;
      if (count == kKGroupRows) {
        _mm256_storeu_ps(o, acc[r]);
        continue;
      }
      alignas(32) float lanes[kKGroupRows];
      _mm256_store_ps(lanes, acc[r]);
      for (int64_t i = 0; i < count; ++i) o[i] = lanes[i];
    }
  }

  // Contract as DotTileFn.
  static void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
    const auto* wb = static_cast<const uint8_t*>(w);
    if (n_rows < F::kTileMinRows) {
      for (int r = 0; r < n_rows; r += kMaxRows) {
        const int nr = std::min(kMaxRows, n_rows - r);
        for (int64_t o = 0; o < n_w; ++o) {
          F::kRows(n, wb + o * row_bytes, act + r * act_stride, act_stride, nr, out + r * out_stride + o, out_stride);
        }
      }
      return;
    }
    const int64_t nb = n / kQKK;
    thread_local std::vector<Group> scratch;
    if (static_cast<int64_t>(scratch.size()) < nb) scratch.resize(nb);
    const int tile = static_cast<int>(std::clamp<uint64_t>(kKActTileBytes / act_stride, kKTileRows, 512));
    for (int r0 = 0; r0 < n_rows; r0 += tile) {
      const int tr = std::min(tile, n_rows - r0);
      for (int64_t o = 0; o < n_w; o += kKGroupRows) {
        // Rows past n_w repeat row n_w − 1 (their lanes are computed and dropped).
        const Block* x[kKGroupRows];
        for (int i = 0; i < kKGroupRows; ++i) {
          x[i] = reinterpret_cast<const Block*>(wb + std::min(o + i, n_w - 1) * row_bytes);
        }
        // First pass (the weights come from memory): the next group's rows, contiguous, are fetched at
        // the pace this one is unpacked; 8 rows read side by side give the prefetcher no stream to follow.
        const char* next = reinterpret_cast<const char*>(wb + (o + kKGroupRows) * row_bytes);
        constexpr int kStep = kKGroupRows * static_cast<int>(sizeof(Block));
        for (int64_t b = 0; b < nb; ++b) {
          if (r0 == 0 && o + kKGroupRows < n_w) {
            for (int j = 0; j < kStep; j += 64) _mm_prefetch(next + b * kStep + j, _MM_HINT_T0);
          }
          unpack(x, b, scratch[b]);
        }
        const int64_t count = std::min<int64_t>(kKGroupRows, n_w - o);
        for (int r = 0; r < tr; r += kKTileRows) {
          tile_group<kKTileRows, KTile>(std::min(kKTileRows, tr - r), static_cast<const Group*>(scratch.data()), nb,
                                        act + (r0 + r) * act_stride, act_stride, count,
                                        out + (r0 + r) * out_stride + o, out_stride);
        }
      }
    }
  }
};

}  // namespace
}  // namespace infer::kernels::avx2
