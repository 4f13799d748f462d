// AMX tile kernel for Q4_K weights × Q8_K activations, for batches of rows (amx_common.h). Per group of
// 16 weight rows, every super-block's codes are gathered once into B tiles (one per 32-code sub-block:
// the low nibbles of a qs dword are codes of sub-block 2c, the high nibbles of sub-block 2c+1) and its
// 6-bit scales and mins decoded for the 16 rows at once; TDPBSUD then gives every (activation row,
// weight row, sub-block) integer sum exactly. The super-block sums S = Σ_j sc_j·sum_j and
// M = Σ_j m_j·(bsums of sub-block j) are exact integers too, and the float steps are those of the AVX2
// kernels (avx2_common.h, hsum_rows_i32): every output is bitwise what they give.
#include "kernels/amx_common.h"
#include "kernels/amx_kernels.h"

namespace infer::kernels::amx {

namespace {
struct Q4KGroup {
  static constexpr int kSubLen = 32;
  static constexpr int kSubs = kQKK / kSubLen;  // 8
  static constexpr int kSumGroupLen = 32;       // mins apply per sub-block
  static constexpr int kBTileBytes = kSubLen / 4 * kRowBytes;

  BTiles b_tiles;              // [block][sub-block]
  Buffer<Zmm> sc;         // [block][sub-block]
  Buffer<Zmm> min_pairs;  // [block][pair]: (m[2p], m[2p+1]) as int16 pairs
  Buffer<ZmmF> d, dmin;   // [block]

  const uint8_t* b_tile(int64_t i, int j) const { return b_tiles.tile(i * kSubs + j); }

  void unpack(const uint8_t* w, uint64_t row_bytes, int rows, int64_t n_blocks) {
    b_tiles.resize(n_blocks * kSubs, kBTileBytes);
    sc.resize(static_cast<size_t>(n_blocks * kSubs));
    min_pairs.resize(static_cast<size_t>(n_blocks * kSubs / 2));
    d.resize(static_cast<size_t>(n_blocks));
    dmin.resize(static_cast<size_t>(n_blocks));
    const GroupRows g(row_bytes, rows);
    const __m512i m4 = _mm512_set1_epi8(0x0F), low4 = _mm512_set1_epi32(0x0F);
    const __m512i m6 = _mm512_set1_epi32(0x3F), m2 = _mm512_set1_epi32(0x03);
    for (int64_t i = 0; i < n_blocks; ++i) {
      const int64_t at = i * static_cast<int64_t>(sizeof(BlockQ4_K));
      GroupRows::prefetch_ahead(w, row_bytes, at, sizeof(BlockQ4_K) + 63);
      const __m512i dd = g.gather(w, at);  // d | dmin << 16
      d[i].v = low_halves_f32(dd);
      dmin[i].v = high_halves_f32(dd);
      // §5.1 scales: w0 = sc0..3 (low 6 bits; top 2 bits extend sc4..7), w1 = m0..3 (top 2: m4..7),
      // w2 = low nibbles sc4..7, high nibbles m4..7.
      const __m512i w0 = g.gather(w, at + 4), w1 = g.gather(w, at + 8), w2 = g.gather(w, at + 12);
      __m512i m[kSubs];
      for (int j = 0; j < 4; ++j) {
        sc[i * kSubs + j].v = _mm512_and_si512(_mm512_srli_epi32(w0, 8 * j), m6);
        m[j] = _mm512_and_si512(_mm512_srli_epi32(w1, 8 * j), m6);
        const __m512i top_sc = _mm512_and_si512(_mm512_srli_epi32(w0, 8 * j + 6), m2);
        const __m512i top_m = _mm512_and_si512(_mm512_srli_epi32(w1, 8 * j + 6), m2);
        const __m512i nib = _mm512_srli_epi32(w2, 8 * j);
        sc[i * kSubs + 4 + j].v = _mm512_or_si512(_mm512_and_si512(nib, low4), _mm512_slli_epi32(top_sc, 4));
        m[4 + j] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(nib, 4), low4), _mm512_slli_epi32(top_m, 4));
      }
      for (int p = 0; p < kSubs / 2; ++p) {
        min_pairs[i * kSubs / 2 + p].v = _mm512_or_si512(m[2 * p], _mm512_slli_epi32(m[2 * p + 1], 16));
      }
      // Codes: dword r of qs chunk c holds codes 4r..4r+3 of sub-blocks 2c (low nibbles) and 2c+1 (high).
      for (int c = 0; c < 4; ++c) {
        uint8_t* lo = b_tiles.tile(i * kSubs + 2 * c);
        uint8_t* hi = lo + kBTileBytes;
        for (int r = 0; r < kSubLen / 4; ++r) {
          const __m512i q = g.gather(w, at + offsetof(BlockQ4_K, qs) + 32 * c + 4 * r);
          _mm512_store_si512(lo + r * kRowBytes, _mm512_and_si512(q, m4));
          _mm512_store_si512(hi + r * kRowBytes, _mm512_and_si512(_mm512_srli_epi32(q, 4), m4));
        }
      }
    }
  }

  __m512 accumulate(int64_t i, const CTiles* c, int a, const ActivationSums& sums, int row, __m512 acc) const {
    const __m512i s = scaled_sum(&sc[i * kSubs], c, a, kSubs);
    const __m512i mins = pair_dot(&min_pairs[i * kSubs / 2], sums, row, i, kSubs / 2);
    const __m512 dy = _mm512_set1_ps(sums.scale(row, i));
    acc = _mm512_fmadd_ps(_mm512_mul_ps(d[i].v, dy), _mm512_cvtepi32_ps(s), acc);
    return _mm512_fnmadd_ps(_mm512_mul_ps(dmin[i].v, dy), _mm512_cvtepi32_ps(mins), acc);
  }
};
}  // namespace

void dot_tile_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<Q4KGroup>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::amx
