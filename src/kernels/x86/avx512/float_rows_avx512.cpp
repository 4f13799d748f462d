// The batch tiles of F32, F16 and BF16 weight rows on AVX-512 CPUs, bitwise the AVX2 set's arithmetic
// (float_rows_tile.h), so that dispatch may choose by speed alone; decode and dot_rows stay on the
// AVX2 set, which gives the same values.
// - On 512-bit FMAs, for CPUs that run them at the rate of 256-bit ones (use_avx512_fma_tiles: twice
//   the multiply-adds a cycle): each vector holds two weight rows' 8-lane chains side by side (one row
//   a 256-bit half) against one activation row's 8 elements in both halves, so every (weight row,
//   activation row) pair still sums acc = fma(w, y, acc) over the steps' parts in order, then hsum and
//   the scalar tail.
// - Elsewhere, on 256-bit FMAs with AVX-512VL's 32 registers: float_rows_tile.h's tile, 6 activation
//   rows a pass where AVX2 holds 3.
#include "kernels/x86/avx512/avx512_common.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/float_rows_tile.h"
#include "kernels/quant/quant.h"

namespace infer::kernels::avx512 {

// Internal linkage, as avx512_common.h explains.
namespace {

// Batch tile: kTilePairs pairs of weight rows × kTileRows activation rows per pass over the whole row
// (24 accumulators, the pairs' weight vectors and one activation vector), as the AVX2 tile; sub-tiles
// of at most kSubTileBytes (kSubTileRows rows) keep the weight rows that every row group reads again
// in L2.
constexpr int kTilePairs = 3;
constexpr int kTileRows = 8;
constexpr uint64_t kSubTileBytes = 128 * 1024;
constexpr int64_t kSubTileRows = 64;  // even

// Part h of a step (float_rows_tile.h) of two rows as f32: `lo`'s in the low half, `hi`'s in the high
// half; T, kStep and one() of the rows' type.
struct PairF32 : float_rows::LoadF32 {
  template <int H>
  static __m512 part(const T* lo, const T* hi) {
    const __m512d l = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(lo)));
    return _mm512_castpd_ps(_mm512_insertf64x4(l, _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
  }
};
struct PairF16 : float_rows::LoadF16 {
  template <int H>
  static __m512 part(const T* lo, const T* hi) {
    const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1));
  }
};
struct PairBF16 : float_rows::LoadBF16 {
  template <int H>
  static __m512 part(const T* lo, const T* hi) {
    const __m512i l = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo)));
    const __m512i words = _mm512_inserti64x4(l, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi)), 1);
    if constexpr (H == 0) return _mm512_castsi512_ps(_mm512_slli_epi32(words, 16));
    return _mm512_castsi512_ps(_mm512_and_si512(words, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
};

inline __m256 high_half(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

template <class L>
struct PairTile {
  using T = typename L::T;

  // Pairs [p, p + NP) of a sub-tile against activation rows [0, NR), the whole row in registers: pair
  // q holds weight rows (lo[q], hi[q]), and out gets row 2q + 1 only where it exists (< n_w).
  // Inlined, as the BF16 tile's passes, which ran 10% slower out of line (BM_MatmulPrefill BF16).
  // ahead ≠ 0: the rows that many elements further on (the next pass's) are fetched into L1 at this
  // pass's pace, a row at a time in turn, as many lines a step as the pass reads.
  template <int NP, int NR>
  [[gnu::always_inline]] static void pairs_pass(int64_t n, const T* const* lo, const T* const* hi, int64_t p,
                                                int64_t n_w, const float* const (&y)[NR], float* out,
                                                int64_t out_stride, int64_t ahead = 0) {
    __m512 acc[NP][NR];
    for (auto& row : acc) {
      for (auto& a : row) a = _mm512_setzero_ps();
    }
    constexpr int kFetchesPerStep = static_cast<int>((2 * NP * L::kStep * sizeof(T) + 63) / 64);
    int turn = 0;
    const int64_t steps_end = n / L::kStep * L::kStep;  // the steps end here; the scalar tail follows
    for (int64_t i = 0; i < steps_end; i += L::kStep) {
      if (ahead) {
        for (int f = 0; f < kFetchesPerStep; ++f) {
          const T* row = turn % 2 ? hi[p + turn / 2] : lo[p + turn / 2];
          _mm_prefetch(reinterpret_cast<const char*>(row + ahead + i), _MM_HINT_T0);
          turn = turn + 1 == 2 * NP ? 0 : turn + 1;
        }
      }
      step_part<0, NP, NR>(lo, hi, p, i, y, acc);
      if constexpr (L::kStep == 16) step_part<1, NP, NR>(lo, hi, p, i, y, acc);
    }
    for (int q = 0; q < NP; ++q) {
      for (int r = 0; r < NR; ++r) {
        float* o = out + r * out_stride + 2 * (p + q);
        o[0] = float_rows::finish<L>(_mm512_castps512_ps256(acc[q][r]), lo[p + q], y[r], steps_end, n);
        if (2 * (p + q) + 1 < n_w) o[1] = float_rows::finish<L>(high_half(acc[q][r]), hi[p + q], y[r], steps_end, n);
      }
    }
  }

  // Part H of the step at element i of pairs [p, p + NP).
  template <int H, int NP, int NR>
  [[gnu::always_inline]] static void step_part(const T* const* lo, const T* const* hi, int64_t p, int64_t i,
                                               const float* const (&y)[NR], __m512 (&acc)[NP][NR]) {
    __m512 wv[NP];
    for (int q = 0; q < NP; ++q) wv[q] = L::template part<H>(lo[p + q] + i, hi[p + q] + i);
    for (int r = 0; r < NR; ++r) {
      const float* yp = y[r] + i + 8 * H;
      const __m512 yv = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(yp))));
      for (int q = 0; q < NP; ++q) acc[q][r] = _mm512_fmadd_ps(wv[q], yv, acc[q][r]);
    }
  }

  // Weight rows [0, n_w) of a sub-tile (n_w ≤ kSubTileRows) against activation rows [0, NR). An odd
  // last row is paired with itself and its high half dropped. The first group of rows over the sub-tile
  // (`first`) reads its weights from memory: each pass fetches the next one's rows, too short for the
  // hardware prefetcher's streams (bench_kernels BM_MatmulBatch F16, as float_rows_tile.h).
  template <int NR>
  static void tile_rows(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, float* out, int64_t out_stride, bool first) {
    const int64_t n_pairs = (n_w + 1) / 2;
    const T* lo[kSubTileRows / 2];
    const T* hi[kSubTileRows / 2];
    for (int64_t p = 0; p < n_pairs; ++p) {
      lo[p] = reinterpret_cast<const T*>(w + 2 * p * row_bytes);
      hi[p] = 2 * p + 1 < n_w ? reinterpret_cast<const T*>(w + (2 * p + 1) * row_bytes) : lo[p];
    }
    const float* y[NR];
    for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const float*>(act + r * act_stride);
    int64_t p = 0;
    const auto ahead = first ? static_cast<int64_t>(2 * kTilePairs * row_bytes / sizeof(T)) : 0;
    for (; p + kTilePairs <= n_pairs; p += kTilePairs) {
      pairs_pass<kTilePairs, NR>(n, lo, hi, p, n_w, y, out, out_stride, ahead);
    }
    switch (n_pairs - p) {
      case 1: pairs_pass<1, NR>(n, lo, hi, p, n_w, y, out, out_stride); break;
      case 2: pairs_pass<2, NR>(n, lo, hi, p, n_w, y, out, out_stride); break;
      default: break;
    }
  }

  static void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
    int64_t sub = static_cast<int64_t>(kSubTileBytes / row_bytes) / 2 * 2;
    sub = sub < 2 * kTilePairs ? 2 * kTilePairs : (sub > kSubTileRows ? kSubTileRows : sub);
    dot_sub_tiles<kTileRows, PairTile>(n, static_cast<const uint8_t*>(w), row_bytes, n_w, sub, act, act_stride, n_rows,
                                   out, out_stride);
  }
};
// float_rows_tile.h's tile over sub-tiles of the AVX2 set's size, 6 activation rows a pass.
constexpr int kRows256 = 6;

template <class L>
void dot_tile_256(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, uint64_t act_stride,
                  int n_rows, float* out, int64_t out_stride) {
  int64_t sub = static_cast<int64_t>(kSubTileBytes / row_bytes);
  sub = sub < 1 ? 1 : (sub > kSubTileRows ? kSubTileRows : sub);
  dot_sub_tiles<kRows256, float_rows::Tile<L, kRows256>>(n, static_cast<const uint8_t*>(w), row_bytes, n_w, sub, act,
                                                         act_stride, n_rows, out, out_stride);
}
}  // namespace

void dot_tile_fma256_f32(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                         uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile_256<float_rows::LoadF32>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}
void dot_tile_fma256_f16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                         uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile_256<float_rows::LoadF16>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}
void dot_tile_fma256_bf16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                          uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile_256<float_rows::LoadBF16>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_fma_f32(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                      uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  PairTile<PairF32>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}
void dot_tile_fma_f16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                      uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  PairTile<PairF16>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}
void dot_tile_fma_bf16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  PairTile<PairBF16>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx512
