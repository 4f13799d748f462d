// Q8_0 and Q4_0 weights × Q8_0 activations (read as BlockQ8_0F) on AVX-512 VNNI: the batch kernel
// (dot_tile) of the row layout, for CPUs with AVX-512 VNNI with or without AMX.
//
// A block tile of 4 weight rows × 4 activation rows: each weight block is decoded once for the 4
// activation rows and each activation block loaded once for the 4 weight rows. One zmm holds two
// consecutive blocks (the even block in lanes 0-7, the odd one in lanes 8-15), so the lanes are exactly
// the AVX2 kernel's two accumulators (q8_0_q4_0_avx2.cpp: blocks alternate between acc0 and acc1, a
// trailing odd-count block goes to acc0). VPDPBUSD wants unsigned × signed bytes: the activation codes
// are biased to y + 128 (an XOR with 0x80) and each lane starts from −128·(its four weight codes' sum),
// so the int32 lane sums are exactly the AVX2 kernel's; the float steps per block and lane are its
// d = dw·dy, acc = fma(d, float(sum), acc), and the row's value hsum(acc0 + acc1): every output is
// bitwise what avx2::dot_rows_q8_0 / dot_rows_q4_0 give (invariant 7).
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* operands): a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/amx_kernels.h"
#include "kernels/blocks.h"

namespace infer::kernels::amx {

// Everything here has internal linkage and no standard-library template is used (amx_common.h: a
// template instantiated in a file compiled with AVX-512 is a weak symbol the linker may pick for all).
namespace {
inline int64_t min_of(int64_t a, int64_t b) { return a < b ? a : b; }
constexpr int kTileW = 4;  // weight rows per register block
constexpr int kTileA = 4;  // activation rows per register block
// Weight rows per cache tile: the activation rows stream past this many weight rows, which stay in L2.
constexpr uint64_t kWeightTileBytes = 96 * 1024;

template <bool B>
struct Pair {
  static constexpr bool value = B;
};

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Two blocks' f16 scales, 8 lanes each (the exact conversion the AVX2 kernel makes).
inline __m512 scales16(uint16_t d0, uint16_t d1) {
  const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(d0))),
                                            _mm_set1_epi16(static_cast<short>(d1)), 1);
  return _mm512_cvtph_ps(h);
}

struct DecodeQ8_0 {
  using Block = BlockQ8_0;
  static __m512i codes(const Block& b0, const Block& b1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(b0.qs)), load256(b1.qs), 1);
  }
  static __m512i codes(const Block& b0) { return _mm512_zextsi256_si512(load256(b0.qs)); }
};

struct DecodeQ4_0 {
  using Block = BlockQ4_0;
  // 128-bit lanes: b0.qs low nibbles, b0.qs high nibbles, b1.qs low, b1.qs high (each block's
  // elements 0-15 then 16-31, as in the AVX2 kernel), minus 8.
  static __m512i codes(const Block& b0, const Block& b1) {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0.qs));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1.qs));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(q0, q0)), _mm256_set_m128i(q1, q1), 1);
    return nibbles(q);
  }
  static __m512i codes(const Block& b0) {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0.qs));
    return nibbles(_mm512_zextsi256_si512(_mm256_set_m128i(q0, q0)));
  }
  static __m512i nibbles(__m512i q) {
    const __m512i shifted = _mm512_srlv_epi32(q, _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4));
    return _mm512_sub_epi8(_mm512_and_si512(shifted, _mm512_set1_epi8(0x0F)), _mm512_set1_epi8(8));
  }
};

// Lanes 0-7 from lo, 8-15 from hi; and lanes 8-15 of v (AVX-512 F only: the 32x8 forms are DQ).
inline __m512 join(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
inline __m256 high_half(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

inline float hsum256(__m256 v) {  // avx2_common.h hsum, in the same order
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// WR weight rows (row_bytes apart) × AR activation rows (act_stride apart), nb blocks each.
template <class Decode, int WR, int AR>
void tile(int64_t nb, const uint8_t* w, uint64_t row_bytes, const uint8_t* act, uint64_t act_stride, float* out,
          int64_t out_stride) {
  using Block = typename Decode::Block;
  const Block* x[WR];
  const BlockQ8_0F* y[AR];
  for (int i = 0; i < WR; ++i) x[i] = reinterpret_cast<const Block*>(w + i * row_bytes);
  for (int r = 0; r < AR; ++r) y[r] = reinterpret_cast<const BlockQ8_0F*>(act + r * act_stride);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[WR][AR];
  for (int i = 0; i < WR; ++i) {
    for (int r = 0; r < AR; ++r) acc[i][r] = _mm512_setzero_ps();
  }
  // One step over blocks b (lanes 0-7) and, when Pair, b + 1 (lanes 8-15; otherwise those lanes of
  // acc are left as they are).
  auto step = [&](int64_t b, auto pair) {
    constexpr bool kPair = decltype(pair)::value;
    __m512i wq[WR], corr[WR];
    __m512 dw[WR];
    for (int i = 0; i < WR; ++i) {
      wq[i] = kPair ? Decode::codes(x[i][b], x[i][b + 1]) : Decode::codes(x[i][b]);
      corr[i] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, wq[i]));
      dw[i] = scales16(x[i][b].d, kPair ? x[i][b + 1].d : x[i][b].d);
    }
    for (int r = 0; r < AR; ++r) {
      __m512i ya;
      __m512 dy;
      if constexpr (kPair) {
        ya = _mm512_inserti64x4(_mm512_castsi256_si512(load256(y[r][b].qs)), load256(y[r][b + 1].qs), 1);
        dy = join(_mm256_set1_ps(y[r][b].d), _mm256_set1_ps(y[r][b + 1].d));
      } else {
        ya = _mm512_zextsi256_si512(load256(y[r][b].qs));
        dy = _mm512_set1_ps(y[r][b].d);
      }
      ya = _mm512_xor_si512(ya, bias);
      for (int i = 0; i < WR; ++i) {
        const __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(corr[i], ya, wq[i]));
        const __m512 d = _mm512_mul_ps(dw[i], dy);
        acc[i][r] = kPair ? _mm512_fmadd_ps(d, p, acc[i][r]) : _mm512_mask3_fmadd_ps(d, p, acc[i][r], 0x00FF);
      }
    }
  };
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) step(b, Pair<true>{});
  if (b < nb) step(b, Pair<false>{});
  for (int i = 0; i < WR; ++i) {
    for (int r = 0; r < AR; ++r) {
      const __m256 s = _mm256_add_ps(_mm512_castps512_ps256(acc[i][r]), high_half(acc[i][r]));
      out[r * out_stride + i] = hsum256(s);
    }
  }
}

template <class Decode, int WR>
void tile_rows(int ar, int64_t nb, const uint8_t* w, uint64_t row_bytes, const uint8_t* act, uint64_t act_stride,
               float* out, int64_t out_stride) {
  switch (ar) {
    case 1: tile<Decode, WR, 1>(nb, w, row_bytes, act, act_stride, out, out_stride); break;
    case 2: tile<Decode, WR, 2>(nb, w, row_bytes, act, act_stride, out, out_stride); break;
    case 3: tile<Decode, WR, 3>(nb, w, row_bytes, act, act_stride, out, out_stride); break;
    default: tile<Decode, WR, 4>(nb, w, row_bytes, act, act_stride, out, out_stride); break;
  }
}

template <class Decode>
void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, uint64_t act_stride,
              int n_rows, float* out, int64_t out_stride) {
  const int64_t nb = n / kQK0;
  const auto* wb = static_cast<const uint8_t*>(w);
  int64_t tile_rows_w = static_cast<int64_t>(kWeightTileBytes / row_bytes) / kTileW * kTileW;
  if (tile_rows_w < kTileW) tile_rows_w = kTileW;
  for (int64_t w0 = 0; w0 < n_w; w0 += tile_rows_w) {
    const int64_t w1 = min_of(n_w, w0 + tile_rows_w);
    for (int64_t r0 = 0; r0 < n_rows; r0 += kTileA) {
      const int ar = static_cast<int>(min_of(kTileA, n_rows - r0));
      const uint8_t* a = act + r0 * act_stride;
      float* o_rows = out + r0 * out_stride;
      for (int64_t o = w0; o < w1; o += kTileW) {
        const uint8_t* wo = wb + o * row_bytes;
        switch (min_of(kTileW, w1 - o)) {
          case 1: tile_rows<Decode, 1>(ar, nb, wo, row_bytes, a, act_stride, o_rows + o, out_stride); break;
          case 2: tile_rows<Decode, 2>(ar, nb, wo, row_bytes, a, act_stride, o_rows + o, out_stride); break;
          case 3: tile_rows<Decode, 3>(ar, nb, wo, row_bytes, a, act_stride, o_rows + o, out_stride); break;
          default: tile_rows<Decode, 4>(ar, nb, wo, row_bytes, a, act_stride, o_rows + o, out_stride); break;
        }
      }
    }
  }
}
}  // namespace

void dot_tile_vnni_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<DecodeQ8_0>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_vnni_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<DecodeQ4_0>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::amx
