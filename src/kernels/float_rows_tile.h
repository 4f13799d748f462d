// The batch tile of F32, F16 and BF16 weight rows on 256-bit FMAs, for two kernel sets: the AVX2 set
// (float_rows_avx2.cpp; 16 registers: 4 weight rows x 3 activation rows a pass) and, on AVX-512 CPUs
// whose 512-bit FMAs are split, AVX-512VL's 32 registers (float_rows_avx512.cpp; 4 x 6: fewer loads
// and conversions per FMA, BM_MatmulPrefill F16). The activations are f32 rows already rounded to
// F16/BF16 as the references round them. Every (weight row, activation row) pair has one arithmetic
// whatever the tile (invariant 7): one 8-lane accumulator over the 8-element steps in order,
// acc = fma(w, y, acc), then hsum(acc) plus the scalar tail; the AVX2 set's decode and dot_rows use
// the same pass. Include only in those two files: everything here has internal linkage, so that each
// keeps its own copy compiled for its instruction set (avx512_common.h explains why).
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/hsum256.h"
#include "kernels/quant.h"

namespace infer::kernels::float_rows {
namespace {

// 8 weights as f32, and one for the scalar tail.
struct LoadF32 {
  using T = float;
  static __m256 load8(const T* p) { return _mm256_loadu_ps(p); }
  static float one(T v) { return v; }
};
struct LoadF16 {
  using T = uint16_t;
  static __m256 load8(const T* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float one(T v) { return _cvtsh_ss(v); }  // exact, like f16_to_f32
};
struct LoadBF16 {
  using T = uint16_t;
  static __m256 load8(const T* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float one(T v) { return bf16_to_f32(v); }
};

// The end of a pair: hsum(acc) plus the scalar tail of elements [from, n).
template <class L>
float finish(__m256 acc, const typename L::T* x, const float* y, int64_t from, int64_t n) {
  float tail = 0;
  for (int64_t j = from; j < n; ++j) tail += L::one(x[j]) * y[j];
  return hsum(acc) + tail;
}

// kTileWeights weight rows x TileRows activation rows a pass over the whole row (blocks of the row
// kept in L1, the accumulators stored between them, ran slower: BM_MatmulPrefill F16).
template <class L, int TileRows>
struct Tile {
  using T = typename L::T;
  static constexpr int kTileWeights = 4;

  // acc[o][r] += x[o] · y[r] over the 8-element steps of [0, end).
  template <int NW, int NR>
  static void steps(const T* const (&x)[NW], const float* const (&y)[NR], int64_t end, __m256 (&acc)[NW][NR]) {
    for (int64_t i = 0; i + 8 <= end; i += 8) {
      __m256 yv[NR];
      for (int r = 0; r < NR; ++r) yv[r] = _mm256_loadu_ps(y[r] + i);
      for (int o = 0; o < NW; ++o) {
        const __m256 wv = L::load8(x[o] + i);
        for (int r = 0; r < NR; ++r) acc[o][r] = _mm256_fmadd_ps(wv, yv[r], acc[o][r]);
      }
    }
  }

  // NW weight rows x NR activation rows in one pass over the row; out[o][r * out_stride].
  template <int NW, int NR>
  static void pass(int64_t n, const T* const (&x)[NW], const float* const (&y)[NR], float* const (&out)[NW],
                   int64_t out_stride) {
    __m256 acc[NW][NR];
    for (auto& row : acc) {
      for (auto& a : row) a = _mm256_setzero_ps();
    }
    const int64_t steps_end = n / 8 * 8;
    steps(x, y, steps_end, acc);
    if constexpr (NW == 4) {
      if (steps_end == n) {  // no tails: four pairs' sums at once, each still hsum(acc) + 0.0f
        for (int r = 0; r < NR; ++r) {
          alignas(16) float s[4];
          _mm_store_ps(s, _mm_add_ps(hsum4(acc[0][r], acc[1][r], acc[2][r], acc[3][r]), _mm_setzero_ps()));
          for (int o = 0; o < NW; ++o) out[o][r * out_stride] = s[o];
        }
        return;
      }
    }
    for (int o = 0; o < NW; ++o) {
      for (int r = 0; r < NR; ++r) out[o][r * out_stride] = finish<L>(acc[o][r], x[o], y[r], steps_end, n);
    }
  }

  // Weight rows [0, n_w) of a sub-tile against activation rows [0, NR), kTileWeights rows a pass.
  template <int NR>
  static void tile_rows(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, float* out, int64_t out_stride) {
    const float* y[NR];
    for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const float*>(act + r * act_stride);
    int64_t o = 0;
    for (; o + kTileWeights <= n_w; o += kTileWeights) {
      weights_pass<kTileWeights, NR>(n, w, row_bytes, o, y, out, out_stride);
    }
    if (o < n_w) partial_pass<kTileWeights - 1, NR>(static_cast<int>(n_w - o), n, w, row_bytes, o, y, out, out_stride);
  }

  // Weight rows [o, o + NW) of a sub-tile. Inlined, as the BF16 tile's passes, which ran 10% slower
  // out of line (BM_MatmulPrefill BF16).
  template <int NW, int NR>
  [[gnu::always_inline]] static void weights_pass(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t o,
                                                  const float* const (&y)[NR], float* out, int64_t out_stride) {
    const T* x[NW];
    float* dst[NW];
    for (int j = 0; j < NW; ++j) {
      x[j] = reinterpret_cast<const T*>(w + (o + j) * row_bytes);
      dst[j] = out + o + j;
    }
    pass<NW, NR>(n, x, y, dst, out_stride);
  }

  // The last 1..NW weight rows of a sub-tile (fewer than kTileWeights).
  template <int NW, int NR>
  static void partial_pass(int n_w, int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t o,
                           const float* const (&y)[NR], float* out, int64_t out_stride) {
    if constexpr (NW > 1) {
      if (n_w < NW) return partial_pass<NW - 1, NR>(n_w, n, w, row_bytes, o, y, out, out_stride);
    }
    weights_pass<NW, NR>(n, w, row_bytes, o, y, out, out_stride);
  }
};

}  // namespace
}  // namespace infer::kernels::float_rows
