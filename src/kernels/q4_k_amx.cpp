// AMX tile kernel for Q4_K weights × Q8_K activations, for batches of 2..16 rows (amx_common.h).
// Per group of 16 weight rows and super-block: the codes are unpacked into one 16 × 32-byte A tile per
// sub-block and TDPBUSD gives every (weight row, activation row, sub-block) integer sum exactly. AVX-512
// then forms the super-block sums S = Σ_j sc_j·sum_j and M = Σ_j m_j·bsums_j and applies the float steps
// of the AVX2 kernels (avx2_common.h, hsum_rows_i32): every output is bitwise what they give.
#include "kernels/amx_common.h"
#include "kernels/amx_kernels.h"
#include <algorithm>

namespace infer::kernels::amx {

namespace {
constexpr int kSubLen = 32;
constexpr int kSubs = kQKK / kSubLen;  // 8

// One group's unpacked super-block: codes[j][w][32], scales and mins per (w, j), the block floats.
struct Q4KGroupBlock {
  alignas(64) uint8_t codes[kSubs][kGroupRows][kSubLen];
  int32_t sc[kGroupRows][kSubs];
  int32_t min_pairs[kGroupRows][kSubs / 2];  // (m[2p], m[2p+1]) as int16 pairs
  float d[kGroupRows], dmin[kGroupRows];

  void unpack(const uint8_t* w, uint64_t row_bytes, int n_w, int64_t i) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int r = 0; r < kGroupRows; ++r) {
      if (r >= n_w) {  // rows past the matrix: zero codes and scales, results ignored
        for (int j = 0; j < kSubs; ++j) std::memset(codes[j][r], 0, kSubLen);
        for (int j = 0; j < kSubs; ++j) sc[r][j] = 0;
        for (int p = 0; p < kSubs / 2; ++p) min_pairs[r][p] = 0;
        d[r] = dmin[r] = 0.0f;
        continue;
      }
      const BlockQ4_K& b = reinterpret_cast<const BlockQ4_K*>(w + r * row_bytes)[i];
      for (int c = 0; c < 4; ++c) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
        _mm256_store_si256(reinterpret_cast<__m256i*>(codes[2 * c][r]), _mm256_and_si256(q, m4));
        _mm256_store_si256(reinterpret_cast<__m256i*>(codes[2 * c + 1][r]),
                           _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
      }
      uint8_t s[kSubs], m[kSubs];
      unpack_k_scales(b.scales, s, m);
      for (int j = 0; j < kSubs; ++j) sc[r][j] = s[j];
      for (int p = 0; p < kSubs / 2; ++p) min_pairs[r][p] = static_cast<int32_t>(m[2 * p] | uint32_t{m[2 * p + 1]} << 16);
      d[r] = _cvtsh_ss(b.d);
      dmin[r] = _cvtsh_ss(b.dmin);
    }
  }
};

// Four sub-blocks j0..j0+3 into tmm0..3, then stored to c[j0..j0+3].
void multiply_four(const Q4KGroupBlock& g, const PackedActivations& pa, int64_t i, int j0,
                   int32_t (*c)[kGroupRows][kMaxActRows]) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, g.codes[j0], kSubLen);
  _tile_loadd(5, pa.b_tile(i, j0), kBRowBytes);
  _tile_dpbusd(0, 4, 5);
  _tile_loadd(6, g.codes[j0 + 1], kSubLen);
  _tile_loadd(7, pa.b_tile(i, j0 + 1), kBRowBytes);
  _tile_dpbusd(1, 6, 7);
  _tile_loadd(4, g.codes[j0 + 2], kSubLen);
  _tile_loadd(5, pa.b_tile(i, j0 + 2), kBRowBytes);
  _tile_dpbusd(2, 4, 5);
  _tile_loadd(6, g.codes[j0 + 3], kSubLen);
  _tile_loadd(7, pa.b_tile(i, j0 + 3), kBRowBytes);
  _tile_dpbusd(3, 6, 7);
  _tile_stored(0, c[j0], kBRowBytes);
  _tile_stored(1, c[j0 + 1], kBRowBytes);
  _tile_stored(2, c[j0 + 2], kBRowBytes);
  _tile_stored(3, c[j0 + 3], kBRowBytes);
}
}  // namespace

void dot_tile_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  thread_local PackedActivations pa;
  pa.pack(act, act_stride, n_rows, n, kSubLen, kSubLen);
  configure_tiles(kSubLen, n_rows);
  const auto* wb = static_cast<const uint8_t*>(w);
  alignas(64) Q4KGroupBlock g;
  alignas(64) int32_t c[kSubs][kGroupRows][kMaxActRows] = {};
  alignas(64) float acc[kGroupRows][kMaxActRows];
  for (int64_t o0 = 0; o0 < n_w; o0 += kGroupRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kGroupRows, n_w - o0));
    for (auto& a : acc) _mm512_store_ps(a, _mm512_setzero_ps());
    for (int64_t i = 0; i < pa.n_blocks; ++i) {
      g.unpack(wb + o0 * row_bytes, row_bytes, rows, i);
      multiply_four(g, pa, i, 0, c);
      multiply_four(g, pa, i, 4, c);
      const __m512 dy = _mm512_loadu_ps(pa.scales(i));
      for (int r = 0; r < rows; ++r) {
        __m512i s = _mm512_setzero_si512();
        for (int j = 0; j < kSubs; ++j) s = _mm512_add_epi32(s, _mm512_mullo_epi32(_mm512_set1_epi32(g.sc[r][j]), _mm512_load_si512(c[j][r])));
        __m512i m = _mm512_setzero_si512();
        for (int p = 0; p < kSubs / 2; ++p) m = _mm512_dpwssd_epi32(m, _mm512_loadu_si512(pa.pairs(i, p)), _mm512_set1_epi32(g.min_pairs[r][p]));
        __m512 a = _mm512_load_ps(acc[r]);
        a = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(g.d[r]), dy), _mm512_cvtepi32_ps(s), a);
        a = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_set1_ps(g.dmin[r]), dy), _mm512_cvtepi32_ps(m), a);
        _mm512_store_ps(acc[r], a);
      }
    }
    store_outputs(acc, rows, n_rows, out + o0, out_stride);
  }
  _tile_release();
}

}  // namespace infer::kernels::amx
