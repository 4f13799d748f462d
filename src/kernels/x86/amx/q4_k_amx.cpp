// Q4_K weights × Q8_K activations on AMX tiles (amx_common.h): the tile kernel for batches of rows,
// over either layout, and for small batches over the interleaved layout the planes kernel (12-16
// rows; below that, the VNNI kernel of q4_k_q5_k_avx512.cpp).
//
// Tiles: per group of 16 weight rows, every super-block's codes are laid out once as B tiles (one per
// 32-code sub-block: the low nibbles of a qs word are codes of sub-block 2c, the high nibbles of
// sub-block 2c+1) and its 6-bit scales and mins decoded for the 16 rows at once; TDPBSUD then gives
// every (activation row, weight row, sub-block) integer sum exactly. The super-block sums and the
// float steps are the VNNI kernels' (avx512_q4_k.h): every output is bitwise what they give.
#include "kernels/x86/amx/amx_common.h"
#include "kernels/x86/amx/amx_kernels.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_q4_k.h"

namespace infer::kernels::amx {

namespace {
struct Q4KGroup {
  static constexpr int kSubLen = avx512::kSubLen;
  static constexpr int kSubs = avx512::kSubs;
  static constexpr int kSumGroupLen = 32;  // mins apply per sub-block
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_K);
  static constexpr int kBTileBytes = kSubLen / 4 * kRowBytes;

  BTiles b_tiles;         // [block][sub-block]
  Buffer<ZmmF> sc;        // [block][sub-block], as floats (scaled_sum_q4_k)
  Buffer<Zmm> min_pairs;  // [block][pair]: (m[2p], m[2p+1]) as int16 pairs
  Buffer<Zmm> dd;         // [block]: d | dmin << 16

  const uint8_t* b_tile(int64_t i, int j) const { return b_tiles.tile(i * kSubs + j); }

  template <class Source>
  void unpack(const Source& src, int64_t n_blocks) {
    b_tiles.resize(n_blocks * kSubs, kBTileBytes);
    sc.resize(static_cast<size_t>(n_blocks * kSubs));
    min_pairs.resize(static_cast<size_t>(n_blocks * kSubs / 2));
    dd.resize(static_cast<size_t>(n_blocks));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t i = 0; i < n_blocks; ++i) {
      src.prefetch(i);
      dd[i].v = src.word(i, 0);
      __m512i s[kSubs], mp[kSubs / 2];
      decode_scales(src, i, s, mp);
      for (int j = 0; j < kSubs; ++j) sc[i * kSubs + j].v = _mm512_cvtepi32_ps(s[j]);
      for (int p = 0; p < kSubs / 2; ++p) min_pairs[i * kSubs / 2 + p].v = mp[p];
      // Word r of qs chunk c holds codes 4r..4r+3 of sub-blocks 2c (low nibbles) and 2c+1 (high).
      for (int c = 0; c < 4; ++c) {
        uint8_t* lo = b_tiles.tile(i * kSubs + 2 * c);
        uint8_t* hi = lo + kBTileBytes;
        for (int r = 0; r < kSubLen / 4; ++r) {
          const __m512i q = src.word(i, kQs + 32 * c + 4 * r);
          _mm512_store_si512(lo + r * kRowBytes, _mm512_and_si512(q, m4));
          _mm512_store_si512(hi + r * kRowBytes, _mm512_and_si512(_mm512_srli_epi32(q, 4), m4));
        }
      }
    }
  }

  __m512 accumulate(int64_t i, const CTiles* c, int a, const ActivationSums& sums, int row, __m512 acc) const {
    const __m512i s = scaled_sum_q4_k(&sc[i * kSubs], c, a);
    const __m512i mins = pair_dot(&min_pairs[i * kSubs / 2], sums, row, i, kSubs / 2);
    return add_block(BlockScales(dd[i].v), s, mins, sums.scale(row, i), acc);
  }
};

// Small batches over the interleaved layout on the tiles, one B tile per (64-code chunk, plane): the
// 6-bit scale is split as sc = lo + 16·hi (lo ≤ 15, hi ≤ 3), plane 0 holds code·lo and plane 1
// code·hi (both ≤ 225: bytes), so S = C0 + 16·C1 exactly.
struct Q4KPlanes {
  static constexpr int kSumGroupLen = 32;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_K);
  struct Terms {
    BlockScales scales;
    __m512i min_pairs[kSubs / 2];
  };

  static void build(const InterleavedRows& src, int64_t i, PlaneTiles& t, Terms& terms) {
    __m512i sc[kSubs];
    decode_scales(src, i, sc, terms.min_pairs);
    terms.scales = BlockScales(src.word(i, 0));
    const __m512i m4 = _mm512_set1_epi8(0x0F), low4 = _mm512_set1_epi32(0x0F);
    // Each digit in both 16-bit halves of its lane: VPMULLW multiplies two codes per half-word, and
    // neither product (≤ 225) carries into the next byte.
    auto spread = [](__m512i d) { return _mm512_or_si512(d, _mm512_slli_epi32(d, 16)); };
    // Word r of qs chunk c: codes 4r..4r+3 of sub-blocks 2c (low nibbles; B row r of chunk c) and 2c+1
    // (high nibbles; B row 8 + r).
    for (int c = 0; c < 4; ++c) {
      const __m512i lo0 = spread(_mm512_and_si512(sc[2 * c], low4)), hi0 = spread(_mm512_srli_epi32(sc[2 * c], 4));
      const __m512i lo1 = spread(_mm512_and_si512(sc[2 * c + 1], low4)),
                    hi1 = spread(_mm512_srli_epi32(sc[2 * c + 1], 4));
      uint8_t* p0 = t.b[c][0];
      uint8_t* p1 = t.b[c][1];
      for (int r = 0; r < kSubLen / 4; ++r) {
        const __m512i q = src.word(i, kQs + 32 * c + 4 * r);
        const __m512i q_lo = _mm512_and_si512(q, m4), q_hi = _mm512_and_si512(_mm512_srli_epi32(q, 4), m4);
        _mm512_store_si512(p0 + r * kRowBytes, _mm512_mullo_epi16(q_lo, lo0));
        _mm512_store_si512(p1 + r * kRowBytes, _mm512_mullo_epi16(q_lo, hi0));
        _mm512_store_si512(p0 + (8 + r) * kRowBytes, _mm512_mullo_epi16(q_hi, lo1));
        _mm512_store_si512(p1 + (8 + r) * kRowBytes, _mm512_mullo_epi16(q_hi, hi1));
      }
    }
  }

  static __m512 finish(const Terms& terms, const PlaneSums& c, int a, const ActivationSums& sums, int64_t i,
                       __m512 acc) {
    const __m512i s = _mm512_add_epi32(_mm512_load_si512(c[0][a]), _mm512_slli_epi32(_mm512_load_si512(c[1][a]), 4));
    const __m512i mins = pair_dot(terms.min_pairs, sums, a, i, kSubs / 2);
    return add_block(terms.scales, s, mins, sums.scale(a, i), acc);
  }
};
}  // namespace

void dot_tile_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<Q4KGroup, GatheredRows>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<Q4KGroup, InterleavedRows>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_planes_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                 uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_rows_planes<Q4KPlanes>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::amx
