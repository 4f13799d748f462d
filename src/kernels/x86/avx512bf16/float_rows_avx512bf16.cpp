// BF16 weight rows × BF16 activations on AVX-512 BF16 (VDPBF16PS: 32 products a vector, twice the
// multiply-adds of F32 FMA), for every kernel shape of the set: decode, dot_rows and the batch tile.
// The activations are the reference's own bf16 bytes (ref::quantize_bf16, which quantize_act_bf16 below
// matches bit for bit). Every (weight row, activation row) pair has one arithmetic whichever kernel
// computes it (invariant 7): one 16-lane accumulator over the 32-element steps in order, a masked step
// for the tail (zeros past n), then the lanes summed by one fixed tree. Products of two bf16 are exact
// in f32, so this differs from the reference's double sum by f32 rounding, like the AVX2 kernels.
#include "kernels/x86/avx512/avx512_common.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/quant/quant.h"

namespace infer::kernels::avx512 {

// Internal linkage, as avx512_common.h explains.
namespace {

// Batch tile: kTileWeights weight rows × kTileRows activation rows per pass (24 accumulators, the
// activation vectors and one weight vector: 31 of the 32 registers), each pass over the whole row:
// blocks of the row kept in L1 (the accumulators stored between them) ran slower on rows of 2,048 and
// more (BM_MatmulPrefill BF16 2048/8192, 8192/2048). Sub-tiles of at most kSubTileBytes (kSubTileRows
// rows) keep the weight rows that every row group reads again in L2.
constexpr int kTileWeights = 4;
constexpr int kTileRows = 6;
constexpr uint64_t kSubTileBytes = 128 * 1024;
constexpr int64_t kSubTileRows = 64;
// Decode: weight rows dotted at once, each a long sequential stream (one per equal part of the
// chunk), as in the AVX2 set: 8 adjacent rows a pass read slower (infer bench tg64, BF16, Zen 4).
constexpr int kRowStreams = 4;

inline __m512bh load32(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_tail(const uint16_t* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

// The fixed lane tree every kernel shape ends with.
inline float reduce(__m512 acc) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(acc), hi);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// `reduce` of 16 accumulators at once, lane i of the result reduce(x[i]) bit for bit: each stage adds
// the same lane pairs in the same order as reduce's, transposed so that one add serves 2-16 accumulators
// (BM_MatmulPrefill BF16: the per-pair trees took a fifth of the tile's time).
inline __m512 upper_plus_lower(__m512 a, __m512 b) {  // [a's 8 sums, b's 8 sums]
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
inline __m512 fours(__m512 ab, __m512 cd) {  // quarters: a's, b's, c's, d's 4 sums
  return _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
}
inline __m512 reduce16(const __m512 (&x)[16]) {
  __m512 w[4];
  for (int j = 0; j < 4; ++j) {  // w[j] quarter q: x[4q + j]'s 4 sums
    w[j] = fours(upper_plus_lower(x[j], x[4 + j]), upper_plus_lower(x[8 + j], x[12 + j]));
  }
  const __m512 u0 = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 u1 = _mm512_add_ps(_mm512_shuffle_ps(w[2], w[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(w[2], w[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The sums of NW ≤ 4 weight rows × NR activation rows: out[r * out_stride + j] = reduce(acc[j][r]),
// four activation rows per reduce16.
template <int NW, int NR>
inline void reduce_out(const __m512 (&acc)[NW][NR], float* out, int64_t out_stride) {
  for (int r0 = 0; r0 < NR; r0 += 4) {
    __m512 x[16];
    for (int i = 0; i < 16; ++i) {
      const int r = r0 + i / 4, j = i % 4;
      x[i] = r < NR && j < NW ? acc[j][r] : _mm512_setzero_ps();
    }
    alignas(64) float sums[16];
    _mm512_store_ps(sums, reduce16(x));
    for (int rr = 0; rr < 4 && r0 + rr < NR; ++rr) {
      float* o = out + (r0 + rr) * out_stride;
      if constexpr (NW == 4) {
        _mm_storeu_ps(o, _mm_load_ps(sums + 4 * rr));
      } else {
        for (int j = 0; j < NW; ++j) o[j] = sums[4 * rr + j];
      }
    }
  }
}

// acc[o][r] = x[o] · y[r] over the row's n elements, 32 a step and a masked last step for the tail.
// ahead ≠ 0: the rows that many elements further on (the next block's) are fetched into L1 at this
// block's pace, a line of each a step.
template <int NW, int NR>
inline void dot_pairs(int64_t n, const uint16_t* const (&x)[NW], const uint16_t* const (&y)[NR],
                      __m512 (&acc)[NW][NR], int64_t ahead = 0) {
  for (auto& row : acc) {
    for (auto& a : row) a = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if (ahead) {
      for (int o = 0; o < NW; ++o) _mm_prefetch(reinterpret_cast<const char*>(x[o] + ahead + i), _MM_HINT_T0);
    }
    __m512bh yv[NR];
    for (int r = 0; r < NR; ++r) yv[r] = load32(y[r] + i);
    for (int o = 0; o < NW; ++o) {
      const __m512bh wv = load32(x[o] + i);
      for (int r = 0; r < NR; ++r) acc[o][r] = _mm512_dpbf16_ps(acc[o][r], wv, yv[r]);
    }
  }
  if (i < n) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (n - i)) - 1);
    __m512bh yv[NR];
    for (int r = 0; r < NR; ++r) yv[r] = load_tail(y[r] + i, m);
    for (int o = 0; o < NW; ++o) {
      const __m512bh wv = load_tail(x[o] + i, m);
      for (int r = 0; r < NR; ++r) acc[o][r] = _mm512_dpbf16_ps(acc[o][r], wv, yv[r]);
    }
  }
}

// NW weight rows × NR activation rows over the whole row; out[o][r * out_stride].
template <int NW, int NR>
void pass(int64_t n, const uint16_t* const (&x)[NW], const uint16_t* const (&y)[NR], float* const (&out)[NW],
          int64_t out_stride) {
  __m512 acc[NW][NR];
  dot_pairs<NW, NR>(n, x, y, acc);
  for (int o = 0; o < NW; ++o) {
    for (int r = 0; r < NR; ++r) out[o][r * out_stride] = reduce(acc[o][r]);
  }
}

// NW weight rows `stream_bytes` apart against one activation row; out[k * out_stride].
template <int NW>
void outputs(int64_t n, const uint8_t* w, uint64_t stream_bytes, const uint8_t* act, float* out, int64_t out_stride) {
  const uint16_t* x[NW];
  float* o[NW];
  for (int k = 0; k < NW; ++k) {
    x[k] = reinterpret_cast<const uint16_t*>(w + k * stream_bytes);
    o[k] = out + k * out_stride;
  }
  const uint16_t* const y[1] = {reinterpret_cast<const uint16_t*>(act)};
  pass<NW, 1>(n, x, y, o, 0);
}

// Weight rows [o, o + NW) of a sub-tile against activation rows [0, NR), the whole row in registers.
// Inlined: called out of line it ran 10% slower (BM_MatmulPrefill BF16 1024/3072).
template <int NW, int NR>
[[gnu::always_inline]] inline void block(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t o,
                                         const uint16_t* const (&y)[NR], float* out, int64_t out_stride,
                                         int64_t ahead = 0) {
  const uint16_t* x[NW];
  for (int j = 0; j < NW; ++j) x[j] = reinterpret_cast<const uint16_t*>(w + (o + j) * row_bytes);
  __m512 acc[NW][NR];
  dot_pairs<NW, NR>(n, x, y, acc, ahead);
  reduce_out<NW, NR>(acc, out + o, out_stride);
}

// Weight rows [0, n_w) of a sub-tile (n_w ≤ kSubTileRows) against activation rows [0, NR). The first
// group of rows over the sub-tile (`first`) reads its weights from memory: each block fetches the next
// one's rows, too short for the hardware prefetcher's streams (bench_kernels BM_MatmulBatch BF16).
template <int NR>
void sub_tile_rows(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, float* out, int64_t out_stride, bool first) {
  const uint16_t* rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = reinterpret_cast<const uint16_t*>(act + r * act_stride);
  const auto ahead = first ? static_cast<int64_t>(kTileWeights * row_bytes / sizeof(uint16_t)) : 0;
  int64_t o = 0;
  for (; o + kTileWeights <= n_w; o += kTileWeights) {
    block<kTileWeights, NR>(n, w, row_bytes, o, rows, out, out_stride, ahead);
  }
  switch (n_w - o) {
    case 1: block<1, NR>(n, w, row_bytes, o, rows, out, out_stride); break;
    case 2: block<2, NR>(n, w, row_bytes, o, rows, out, out_stride); break;
    case 3: block<3, NR>(n, w, row_bytes, o, rows, out, out_stride); break;
    default: break;
  }
}

struct Tile {  // for dot_sub_tiles
  template <int NR>
  static void tile_rows(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, float* out, int64_t out_stride, bool first) {
    sub_tile_rows<NR>(n, w, row_bytes, n_w, act, act_stride, out, out_stride, first);
  }
};
}  // namespace

void dot_rows_bf16(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  const uint16_t* const x[1] = {static_cast<const uint16_t*>(w)};
  float* const o[1] = {out};
  const auto y = [&](int r) { return reinterpret_cast<const uint16_t*>(act + r * act_stride); };
  switch (n_rows) {
    case 1: { const uint16_t* const ys[1] = {y(0)}; return pass<1, 1>(n, x, ys, o, out_stride); }
    case 2: { const uint16_t* const ys[2] = {y(0), y(1)}; return pass<1, 2>(n, x, ys, o, out_stride); }
    case 3: { const uint16_t* const ys[3] = {y(0), y(1), y(2)}; return pass<1, 3>(n, x, ys, o, out_stride); }
    default: { const uint16_t* const ys[4] = {y(0), y(1), y(2), y(3)}; return pass<1, 4>(n, x, ys, o, out_stride); }
  }
}

void dot_outputs_bf16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t part = n_w / kRowStreams;
  for (int64_t o = 0; o < part; ++o) {
    outputs<kRowStreams>(n, wb + o * row_bytes, part * row_bytes, act, out + o, part);
  }
  for (int64_t o = kRowStreams * part; o < n_w; ++o) outputs<1>(n, wb + o * row_bytes, 0, act, out + o, 0);
}

void dot_tile_bf16(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, uint64_t act_stride,
                   int n_rows, float* out, int64_t out_stride) {
  int64_t sub = static_cast<int64_t>(kSubTileBytes / row_bytes);
  sub = sub < kTileWeights ? kTileWeights : (sub > kSubTileRows ? kSubTileRows : sub);
  dot_sub_tiles<kTileRows, Tile>(n, static_cast<const uint8_t*>(w), row_bytes, n_w, sub, act, act_stride, n_rows, out,
                                 out_stride);
}

// f32_to_bf16 (half.cpp) on 16 lanes: round to nearest even; a NaN keeps its top bits, made quiet.
void quantize_act_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_loadu_si512(src + i);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                  _mm512_set1_epi32(0x7F800000));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i biased = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd);
    const __m512i rounded = _mm512_srli_epi32(biased, 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
    const __m512i bits = _mm512_mask_blend_epi32(nan, rounded, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i), _mm512_cvtepi32_epi16(bits));
  }
  for (; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}

}  // namespace infer::kernels::avx512
