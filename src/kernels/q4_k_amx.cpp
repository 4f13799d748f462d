// Q4_K weights × Q8_K activations on AVX-512/AMX (amx_common.h): the AMX tile kernel for batches of
// rows, over either layout, the AVX-512 VNNI decode kernel over the interleaved layout, and for small
// batches over it the VNNI kernel (up to 11 rows) or the AMX planes kernel (12-16).
//
// Tiles: per group of 16 weight rows, every super-block's codes are laid out once as B tiles (one per
// 32-code sub-block: the low nibbles of a qs word are codes of sub-block 2c, the high nibbles of
// sub-block 2c+1) and its 6-bit scales and mins decoded for the 16 rows at once; TDPBSUD then gives
// every (activation row, weight row, sub-block) integer sum exactly. Decode: VPDPBUSD dots the same
// 16-row code vectors with one activation word broadcast. Both form the super-block sums
// S = Σ_j sc_j·sum_j and M = Σ_j m_j·(bsums of sub-block j) as exact integers and take the float steps
// of the AVX2 kernels (avx2_common.h, hsum_rows_i32): every output is bitwise what they give.
#include "kernels/amx_common.h"
#include "kernels/amx_kernels.h"

namespace infer::kernels::amx {

namespace {
constexpr int kSubLen = 32;
constexpr int kSubs = kQKK / kSubLen;  // 8
constexpr int64_t kQs = offsetof(BlockQ4_K, qs);
// Small batches over the interleaved layout: from this many rows the AMX planes kernel, below it the
// VNNI one; at 8 rows the small matrices gain nothing from the planes (bench_kernels BM_MatmulBatch,
// infer serve-bench; docs/performance.md, "Constants").
constexpr int kRowsByPlanes = 12;

// Scales and mins of super-block i for the 16 rows. §5.1: w0 = sc0..3 (low 6 bits; top 2 bits extend
// sc4..7), w1 = m0..3 (top 2: m4..7), w2 = low nibbles sc4..7, high nibbles m4..7.
template <class Source>
void decode_scales(const Source& src, int64_t i, __m512i* sc, __m512i* min_pairs) {
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

struct Q4KGroup {
  static constexpr int kSubLen = amx::kSubLen;
  static constexpr int kSubs = amx::kSubs;
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

// Decode and small batches over the interleaved layout: super-block i of the 16 rows against NR
// activation rows y[a] (rows row0 + a of `sums`), VPDPBUSD with each activation word broadcast.
struct Q4KDecode {
  static constexpr int kSumGroupLen = 32;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_K);

  template <int NR>
  static void block(const InterleavedRows& src, int64_t i, const BlockQ8_K* const* y, const ActivationSums& sums,
                    int row0, __m512* acc) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i sc[kSubs], min_pairs[kSubs / 2];
    decode_scales(src, i, sc, min_pairs);
    __m512i s[NR];
    for (int a = 0; a < NR; ++a) s[a] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i lo[NR], hi[NR];
      for (int a = 0; a < NR; ++a) lo[a] = hi[a] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int r = 0; r < kSubLen / 4; ++r) {
        const __m512i q = src.word(i, kQs + 32 * c + 4 * r);
        const __m512i q_lo = _mm512_and_si512(q, m4), q_hi = _mm512_and_si512(_mm512_srli_epi32(q, 4), m4);
        for (int a = 0; a < NR; ++a) {
          lo[a] = _mm512_dpbusd_epi32(lo[a], q_lo, broadcast_word(y[a][i].qs + 64 * c + 4 * r));
          hi[a] = _mm512_dpbusd_epi32(hi[a], q_hi, broadcast_word(y[a][i].qs + 64 * c + kSubLen + 4 * r));
        }
      }
      const __m512i sc_lo = scale_words(sc[2 * c]), sc_hi = scale_words(sc[2 * c + 1]);
      for (int a = 0; a < NR; ++a) s[a] = add_scaled(add_scaled(s[a], lo[a], sc_lo), hi[a], sc_hi);
    }
    const BlockScales scales(src.word(i, 0));
    for (int a = 0; a < NR; ++a) {
      acc[a] = add_block(scales, s[a], pair_dot(min_pairs, sums, row0 + a, i, kSubs / 2), y[a][i].d, acc[a]);
    }
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

void dot_outputs_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out) {
  dot_outputs_interleaved<Q4KDecode>(n, w, row_bytes, n_w, act, out);
}

void dot_rows_interleaved_vnni_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_rows_interleaved<Q4KDecode>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_rows_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  if (n_rows >= kRowsByPlanes && n_rows <= kTileActRows) {
    dot_rows_planes<Q4KPlanes>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
    return;
  }
  dot_rows_interleaved_vnni_q4_k(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::amx
