// The batch tile of F32, F16 and BF16 weight rows on 256-bit FMAs, for two kernel sets: the AVX2 set
// (float_rows_avx2.cpp; 16 registers: 4 weight rows x 3 activation rows a pass) and, on AVX-512 CPUs
// whose 512-bit FMAs are split, AVX-512VL's 32 registers (float_rows_avx512.cpp; 4 x 6: fewer loads
// and conversions per FMA, BM_MatmulPrefill F16). The activations are f32 rows already rounded to
// F16/BF16 as the references round them. Every (weight row, activation row) pair has one arithmetic
// whatever the tile (invariant 7): one 8-lane accumulator over the steps of L::kStep elements in
// order, each step's 8-lane parts in order, acc = fma(w, y, acc), then hsum(acc) plus the scalar tail;
// the AVX2 set's decode and dot_rows use the same pass. Include only in those two files: everything
// here has internal linkage, so that each keeps its own copy compiled for its instruction set
// (avx512_common.h explains why).
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/hsum256.h"
#include "kernels/quant/quant.h"

namespace infer::kernels::float_rows {
namespace {

// A step of kStep weights as kStep / 8 parts of 8 f32 lanes, the activation row's f32 values of the
// step in the same order (y + 8·part), and one weight for the scalar tail.
struct LoadF32 {
  using T = float;
  static constexpr int kStep = 8;
  template <int H>
  static __m256 part(const T* p) { return _mm256_loadu_ps(p); }
  static float one(T v) { return v; }
};
struct LoadF16 {
  using T = uint16_t;
  static constexpr int kStep = 8;
  template <int H>
  static __m256 part(const T* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float one(T v) { return _cvtsh_ss(v); }  // exact, like f16_to_f32
};
// BF16: 16 weights a step, the even elements then the odd ones, each a shift or a mask of the 32-bit
// words: no widening shuffle, which competes with the FMAs for their ports (infer bench pp512 BF16,
// INFER_NO_AVX512=1). The activation rows are stored in that order (bf16_pair_order).
struct LoadBF16 {
  using T = uint16_t;
  static constexpr int kStep = 16;
  template <int H>
  static __m256 part(const T* p) {
    const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (H == 0) return _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
    return _mm256_castsi256_ps(_mm256_and_si256(words, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  static float one(T v) { return bf16_to_f32(v); }
};

// One step of 16 activation values (already rounded to BF16) stored in LoadBF16's order: the 8 even
// elements, then the 8 odd ones. A row's tail after its last full step stays in element order.
inline void bf16_pair_order(const __m256 (&step)[2], float* out) {
  const __m256 even = _mm256_shuffle_ps(step[0], step[1], 0x88);  // lanes 0 2 8 10 | 4 6 12 14 of the 16
  const __m256 odd = _mm256_shuffle_ps(step[0], step[1], 0xDD);
  _mm256_storeu_ps(out, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8)));
  _mm256_storeu_ps(out + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), 0xD8)));
}

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

  // acc[o][r] += x[o] · y[r] over the steps of [0, end), part by part. ahead ≠ 0: the rows that many
  // elements further on (the next pass's) are fetched into L1 at this pass's pace, a row at a time in
  // turn, as many lines a step as the pass reads.
  template <int NW, int NR>
  static void steps(const T* const (&x)[NW], const float* const (&y)[NR], int64_t end, __m256 (&acc)[NW][NR],
                    int64_t ahead) {
    constexpr int kFetchesPerStep = static_cast<int>((NW * L::kStep * sizeof(T) + 63) / 64);
    int turn = 0;
    for (int64_t i = 0; i + L::kStep <= end; i += L::kStep) {
      if (ahead) {
        for (int f = 0; f < kFetchesPerStep; ++f) {
          _mm_prefetch(reinterpret_cast<const char*>(x[turn] + ahead + i), _MM_HINT_T0);
          turn = turn + 1 == NW ? 0 : turn + 1;
        }
      }
      step_part<0>(x, y, i, acc);
      if constexpr (L::kStep == 16) step_part<1>(x, y, i, acc);
    }
  }

  // Part H of the step at element i.
  template <int H, int NW, int NR>
  [[gnu::always_inline]] static void step_part(const T* const (&x)[NW], const float* const (&y)[NR], int64_t i,
                                               __m256 (&acc)[NW][NR]) {
    __m256 yv[NR];
    for (int r = 0; r < NR; ++r) yv[r] = _mm256_loadu_ps(y[r] + i + 8 * H);
    for (int o = 0; o < NW; ++o) {
      const __m256 wv = L::template part<H>(x[o] + i);
      for (int r = 0; r < NR; ++r) acc[o][r] = _mm256_fmadd_ps(wv, yv[r], acc[o][r]);
    }
  }

  // NW weight rows x NR activation rows in one pass over the row; out[o][r * out_stride]. ahead: as
  // steps takes it.
  template <int NW, int NR>
  static void pass(int64_t n, const T* const (&x)[NW], const float* const (&y)[NR], float* const (&out)[NW],
                   int64_t out_stride, int64_t ahead = 0) {
    __m256 acc[NW][NR];
    for (auto& row : acc) {
      for (auto& a : row) a = _mm256_setzero_ps();
    }
    const int64_t steps_end = n / L::kStep * L::kStep;
    steps(x, y, steps_end, acc, ahead);
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

  // Weight rows [0, n_w) of a sub-tile against activation rows [0, NR), kTileWeights rows a pass. The
  // first group of rows over the sub-tile (`first`) reads its weights from memory: each pass fetches the
  // next one's rows, which are too short (a few KiB) for the hardware prefetcher's streams to ramp up
  // (bench_kernels BM_MatmulBatch F16, 4-16 rows).
  template <int NR>
  static void tile_rows(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, float* out, int64_t out_stride, bool first) {
    const float* y[NR];
    for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const float*>(act + r * act_stride);
    const auto ahead = first ? static_cast<int64_t>(kTileWeights * row_bytes / sizeof(T)) : 0;
    int64_t o = 0;
    for (; o + kTileWeights <= n_w; o += kTileWeights) {
      weights_pass<kTileWeights, NR>(n, w, row_bytes, o, y, out, out_stride, ahead);
    }
    if (o < n_w) partial_pass<kTileWeights - 1, NR>(static_cast<int>(n_w - o), n, w, row_bytes, o, y, out, out_stride);
  }

  // Weight rows [o, o + NW) of a sub-tile. Inlined, as the BF16 tile's passes, which ran 10% slower
  // out of line (BM_MatmulPrefill BF16).
  template <int NW, int NR>
  [[gnu::always_inline]] static void weights_pass(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t o,
                                                  const float* const (&y)[NR], float* out, int64_t out_stride,
                                                  int64_t ahead = 0) {
    const T* x[NW];
    float* dst[NW];
    for (int j = 0; j < NW; ++j) {
      x[j] = reinterpret_cast<const T*>(w + (o + j) * row_bytes);
      dst[j] = out + o + j;
    }
    pass<NW, NR>(n, x, y, dst, out_stride, ahead);
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
