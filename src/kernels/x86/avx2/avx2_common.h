// Helpers shared by the *_avx2.cpp kernels (compiled with -mavx2 -mfma -mf16c). Include only there.
#pragma once
#include <immintrin.h>

#include <algorithm>

#include <cstdint>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/x86/f16_lanes.h"
#include "kernels/x86/hsum256.h"
#include "kernels/matmul/row_kernels.h"
#include "kernels/x86/tile_group.h"

namespace infer::kernels::avx2 {

// hsum, hsum4: kernels/x86/hsum256.h.

inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// The largest lane (max is exact, so any order gives it).
inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// The largest magnitude of a block's 32 floats.
inline float amax32(const __m256 (&v)[4]) {
  return hmax(_mm256_max_ps(_mm256_max_ps(abs8(v[0]), abs8(v[1])), _mm256_max_ps(abs8(v[2]), abs8(v[3]))));
}

// 32 int32 lanes in the int8 range, in element order, as 32 int8: the packs work within 128-bit lanes
// and the final permute restores the order.
inline __m256i pack_i8(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The four exact int32 sums of a, b, c, d (lanes 0..3 of the result).
inline __m128i hsum4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// K-quant rows (Q4_K, Q6_K) keep one float per row and add each super-block's exact integer sums in
// super-block order: acc = fma(d·dy, float(S), acc), then acc = fma(−(dmin·dy), float(M), acc) for the
// min term. Every kernel shape that gets the same integers (AVX2 lanes, AMX tiles) therefore gives
// bitwise the same row (invariant 7), whichever of them a batch uses. Kernels hold up to four such
// rows in the lanes of one __m128: the lane arithmetic is the same IEEE operation as a scalar one.
template <int N>
inline __m128i hsum_rows_i32(const __m256i (&v)[N]) {
  static_assert(N >= 1 && N <= 4);
  const __m256i z = _mm256_setzero_si256();
  return hsum4_i32(v[0], N > 1 ? v[1 % N] : z, N > 2 ? v[2 % N] : z, N > 3 ? v[3 % N] : z);
}

// Lanes r < N: the activation scales y[r][i].d of super-block i (others 0), built in registers (a
// vector load of scalars just stored would miss store forwarding).
template <int N>
inline __m128 row_scales(const BlockQ8_K* const (&y)[N], int64_t i) {
  return _mm_setr_ps(y[0][i].d, N > 1 ? y[1 % N][i].d : 0.0f, N > 2 ? y[2 % N][i].d : 0.0f,
                     N > 3 ? y[3 % N][i].d : 0.0f);
}

template <int N>
inline void store_rows(__m128 acc, float* out, int64_t out_stride) {
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, acc);
  for (int r = 0; r < N; ++r) out[r * out_stride] = lanes[r];
}

inline float f16(uint16_t h) { return _cvtsh_ss(h); }  // exact, like f16_to_f32

// The f16 scales `d` (or another f16 field) of 8 blocks as floats (f16_lanes8: in the block kernels
// the integer units are idle, the vector ones not).
template <class Block>
inline __m256 block_scales8(const Block* const (&blk)[8], uint16_t Block::*field = &Block::d) {
  return _mm256_cvtph_ps(f16_lanes8([&](int i) { return blk[i]->*field; }));
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 4 bytes at p as one 32-bit word (for a broadcast).
inline int32_t load_word(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Σ of 32 signed bytes, exact: biased to unsigned (x ^ 0x80 = x + 128), summed by psadbw against
// zero, then the bias 32·128 taken off.
inline int32_t sum_i8(__m256i q) {
  const __m256i v = _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))),
                                    _mm256_setzero_si256());
  __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(s) - 32 * 128;
}

// Calls Kernel<NR> for a run-time row count 1..kMaxRows. Each instantiation performs, for every row,
// exactly the arithmetic of Kernel<1>: rows only share the weight loads and unpacking.
template <template <int> class Kernel>
void dot_rows_dispatch(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows,
                       float* out, int64_t out_stride) {
  switch (n_rows) {
    case 1: return Kernel<1>::run(n, w, act, act_stride, out, out_stride);
    case 2: return Kernel<2>::run(n, w, act, act_stride, out, out_stride);
    case 3: return Kernel<3>::run(n, w, act, act_stride, out, out_stride);
    default: return Kernel<4>::run(n, w, act, act_stride, out, out_stride);
  }
}

// Batch driver of the tile kernels: weight rows in sub-tiles of at most sub_tile_bytes (and
// max_sub_rows rows), which stay in L2 while every group of up to TileRows activation rows passes
// over them; Tile::tile_rows<NR>(n, w, row_bytes, n_w, act, act_stride, out, out_stride, first) does one
// group (first: the sub-tile's first group, whose weight rows come from memory).
template <int TileRows, class Tile>
void dot_sub_tiles(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride, uint64_t sub_tile_bytes,
                   int64_t max_sub_rows) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t sub = std::clamp<int64_t>(static_cast<int64_t>(sub_tile_bytes / row_bytes), 1, max_sub_rows);
  for (int64_t o0 = 0; o0 < n_w; o0 += sub) {
    const int64_t nw = std::min(sub, n_w - o0);
    for (int r = 0; r < n_rows; r += TileRows) {
      tile_group<TileRows, Tile>(std::min(TileRows, n_rows - r), n, wb + o0 * row_bytes, row_bytes, nw,
                                 act + r * act_stride, act_stride, out + r * out_stride + o0, out_stride, r == 0);
    }
  }
}

// Decode (one activation row): dots n_w consecutive weight rows by running NW memory streams at once,
// one per equal part of the chunk (part k's row o is row k·part + o), which keeps more reads in flight
// than one stream. Outputs<NW>::run(n, w, stream_bytes, act, out, out_stride) dots the NW rows
// w + k·stream_bytes into out[k·out_stride]; each row's value is bitwise what Outputs<1> gives.
template <int NW, template <int> class Outputs>
void dot_outputs_in_streams(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                            float* out) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t part = n_w / NW;
  for (int64_t o = 0; o < part; ++o) {
    Outputs<NW>::run(n, wb + o * row_bytes, part * row_bytes, act, out + o, part);
  }
  for (int64_t o = NW * part; o < n_w; ++o) Outputs<1>::run(n, wb + o * row_bytes, 0, act, out + o, 0);
}

}  // namespace infer::kernels::avx2
