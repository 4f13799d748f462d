// AMX tile kernel for Q4_K weights × Q8_K activations, for batches of rows (amx_common.h). Per group of
// 16 weight rows, every super-block's codes are gathered once into B tiles (one per 32-code sub-block:
// the low nibbles of a qs dword are codes of sub-block 2c, the high nibbles of sub-block 2c+1) and its
// 6-bit scales and mins decoded for the 16 rows at once; then, for each 16 activation rows, TDPBSUD
// gives every (activation row, weight row, sub-block) integer sum exactly. The super-block sums
// S = Σ_j sc_j·sum_j and M = Σ_j m_j·(bsums of sub-block j) are exact integers too, and the float steps
// are those of the AVX2 kernels (avx2_common.h, hsum_rows_i32): every output is bitwise what they give.
#include <algorithm>

#include "kernels/amx_common.h"
#include "kernels/amx_kernels.h"

namespace infer::kernels::amx {

namespace {
constexpr int kSubLen = 32;
constexpr int kSubs = kQKK / kSubLen;  // 8
constexpr int kBTileBytes = kSubLen / 4 * kRowBytes;

// One group's super-blocks, unpacked: B tiles, and per super-block the scales, min pairs and floats
// as vectors over the 16 weight rows.
struct Q4KGroup {
  std::vector<uint8_t> b_tiles;  // [block][sub-block] kBTileBytes each, 64-byte aligned
  std::vector<Zmm> sc;         // [block][sub-block]
  std::vector<Zmm> min_pairs;  // [block][pair]: (m[2p], m[2p+1]) as int16 pairs
  std::vector<ZmmF> d, dmin;   // [block]

  const uint8_t* b_tile(int64_t i, int j) const { return aligned() + (i * kSubs + j) * kBTileBytes; }
  uint8_t* aligned() const {
    const auto p = reinterpret_cast<uintptr_t>(b_tiles.data());
    return reinterpret_cast<uint8_t*>((p + 63) / 64 * 64);
  }

  void unpack(const uint8_t* w, uint64_t row_bytes, int rows, int64_t n_blocks) {
    b_tiles.resize(static_cast<size_t>(n_blocks * kSubs * kBTileBytes + 64));
    sc.resize(static_cast<size_t>(n_blocks * kSubs));
    min_pairs.resize(static_cast<size_t>(n_blocks * kSubs / 2));
    d.resize(static_cast<size_t>(n_blocks));
    dmin.resize(static_cast<size_t>(n_blocks));
    const GroupRows g(row_bytes, rows);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi32(0x3F), m2 = _mm512_set1_epi32(0x03);
    for (int64_t i = 0; i < n_blocks; ++i) {
      const int64_t at = i * static_cast<int64_t>(sizeof(BlockQ4_K));
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
        sc[i * kSubs + 4 + j].v = _mm512_or_si512(_mm512_and_si512(nib, _mm512_set1_epi32(0x0F)), _mm512_slli_epi32(top_sc, 4));
        m[4 + j] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(nib, 4), _mm512_set1_epi32(0x0F)), _mm512_slli_epi32(top_m, 4));
      }
      for (int p = 0; p < kSubs / 2; ++p) min_pairs[i * kSubs / 2 + p].v = _mm512_or_si512(m[2 * p], _mm512_slli_epi32(m[2 * p + 1], 16));
      // Codes: dword r of qs chunk c holds codes 4r..4r+3 of sub-blocks 2c (low nibbles) and 2c+1 (high).
      for (int c = 0; c < 4; ++c) {
        uint8_t* lo = aligned() + (i * kSubs + 2 * c) * kBTileBytes;
        uint8_t* hi = lo + kBTileBytes;
        for (int r = 0; r < kSubLen / 4; ++r) {
          const __m512i q = g.gather(w, at + 16 + 32 * c + 4 * r);
          _mm512_store_si512(lo + r * kRowBytes, _mm512_and_si512(q, m4));
          _mm512_store_si512(hi + r * kRowBytes, _mm512_and_si512(_mm512_srli_epi32(q, 4), m4));
        }
      }
    }
  }
};

// Sub-blocks j0..j0+3 of super-block i into tmm0..3, stored to c[j0..j0+3] (rows: activation rows).
void multiply_four(const Q4KGroup& g, const uint8_t* a_codes, uint64_t act_stride, int64_t i, int j0,
                   int32_t (*c)[kTileActRows][kGroupRows]) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const auto stride = static_cast<long>(act_stride);
  _tile_loadd(4, a_codes + kSubLen * j0, stride);
  _tile_loadd(5, g.b_tile(i, j0), kRowBytes);
  _tile_dpbsud(0, 4, 5);
  _tile_loadd(6, a_codes + kSubLen * (j0 + 1), stride);
  _tile_loadd(7, g.b_tile(i, j0 + 1), kRowBytes);
  _tile_dpbsud(1, 6, 7);
  _tile_loadd(4, a_codes + kSubLen * (j0 + 2), stride);
  _tile_loadd(5, g.b_tile(i, j0 + 2), kRowBytes);
  _tile_dpbsud(2, 4, 5);
  _tile_loadd(6, a_codes + kSubLen * (j0 + 3), stride);
  _tile_loadd(7, g.b_tile(i, j0 + 3), kRowBytes);
  _tile_dpbsud(3, 6, 7);
  _tile_stored(0, c[j0], kRowBytes);
  _tile_stored(1, c[j0 + 1], kRowBytes);
  _tile_stored(2, c[j0 + 2], kRowBytes);
  _tile_stored(3, c[j0 + 3], kRowBytes);
}
}  // namespace

void dot_tile_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  thread_local ActivationSums sums;
  thread_local Q4KGroup g;
  sums.build(act, act_stride, n_rows, n, kSubLen);
  const int64_t nb = sums.n_blocks;
  const auto* wb = static_cast<const uint8_t*>(w);
  alignas(64) int32_t c[kSubs][kTileActRows][kGroupRows];
  alignas(64) float acc[kTileActRows][kGroupRows];
  int configured = 0;
  for (int64_t o0 = 0; o0 < n_w; o0 += kGroupRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kGroupRows, n_w - o0));
    g.unpack(wb + o0 * row_bytes, row_bytes, rows, nb);
    for (int a0 = 0; a0 < n_rows; a0 += kTileActRows) {
      const int m = std::min(kTileActRows, n_rows - a0);
      if (m != configured) {
        configure_tiles(kSubLen, m);
        configured = m;
      }
      for (int a = 0; a < m; ++a) _mm512_store_ps(acc[a], _mm512_setzero_ps());
      for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* a_codes = act + a0 * act_stride + i * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs);
        multiply_four(g, a_codes, act_stride, i, 0, c);
        multiply_four(g, a_codes, act_stride, i, 4, c);
        for (int a = 0; a < m; ++a) {
          __m512i s = _mm512_setzero_si512();
          for (int j = 0; j < kSubs; ++j) s = _mm512_add_epi32(s, _mm512_mullo_epi32(g.sc[i * kSubs + j].v, _mm512_load_si512(c[j][a])));
          __m512i mins = _mm512_setzero_si512();
          for (int p = 0; p < kSubs / 2; ++p) {
            mins = _mm512_dpwssd_epi32(mins, g.min_pairs[i * kSubs / 2 + p].v, _mm512_set1_epi32(sums.pair(a0 + a, i, p)));
          }
          const __m512 dy = _mm512_set1_ps(sums.scale(a0 + a, i));
          __m512 v = _mm512_load_ps(acc[a]);
          v = _mm512_fmadd_ps(_mm512_mul_ps(g.d[i].v, dy), _mm512_cvtepi32_ps(s), v);
          v = _mm512_fnmadd_ps(_mm512_mul_ps(g.dmin[i].v, dy), _mm512_cvtepi32_ps(mins), v);
          _mm512_store_ps(acc[a], v);
        }
      }
      const auto mask = static_cast<__mmask16>((1u << rows) - 1);
      for (int a = 0; a < m; ++a) _mm512_mask_storeu_ps(out + (a0 + a) * out_stride + o0, mask, _mm512_load_ps(acc[a]));
    }
  }
  _tile_release();
}

}  // namespace infer::kernels::amx
