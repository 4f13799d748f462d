// AMX tile kernel for Q6_K weights × Q8_K activations, for batches of rows (amx_common.h). A super-block
// has 16 sub-blocks of 16 codes, each with a signed 8-bit scale. Element 128h + 32g + k (half h, group
// g, k < 32) is ql[64h + 32(g & 1) + k] >> 4(g >> 1) (low 4 bits) with (qh[32h + k] >> 2g) & 3 on top,
// and belongs to sub-block 8h + 2g + k/16. The codes are gathered into B tiles unsigned (0..63) and the
// −32 offset is taken off as 32·Σ_s sc_s·bsums_s, which is exactly the AVX2 kernels' integer; the float
// step is theirs too (avx2_common.h, hsum_rows_i32), so every output is bitwise what they give.
#include "kernels/amx_common.h"
#include "kernels/amx_kernels.h"

namespace infer::kernels::amx {

namespace {
struct Q6KGroup {
  static constexpr int kSubLen = 16;
  static constexpr int kSubs = kQKK / kSubLen;  // 16
  static constexpr int kSumGroupLen = 16;       // the offset applies per sub-block
  static constexpr int kBTileBytes = kSubLen / 4 * kRowBytes;

  BTiles b_tiles;               // [block][sub-block]
  Buffer<Zmm> sc;          // [block][sub-block], sign-extended
  Buffer<Zmm> sc_pairs;    // [block][pair]: (sc[2p], sc[2p+1]) as int16 pairs
  Buffer<ZmmF> d;          // [block]

  const uint8_t* b_tile(int64_t i, int j) const { return b_tiles.tile(i * kSubs + j); }

  void unpack(const uint8_t* w, uint64_t row_bytes, int rows, int64_t n_blocks) {
    b_tiles.resize(n_blocks * kSubs, kBTileBytes);
    sc.resize(static_cast<size_t>(n_blocks * kSubs));
    sc_pairs.resize(static_cast<size_t>(n_blocks * kSubs / 2));
    d.resize(static_cast<size_t>(n_blocks));
    const GroupRows g(row_bytes, rows);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2_at_4 = _mm512_set1_epi8(0x30);
    const __m512i low16 = _mm512_set1_epi32(0xFFFF);
    for (int64_t i = 0; i < n_blocks; ++i) {
      const int64_t at = i * static_cast<int64_t>(sizeof(BlockQ6_K));
      GroupRows::prefetch_ahead(w, row_bytes, at, sizeof(BlockQ6_K) + 63);
      // d is the block's last 2 bytes: read the dword ending there (the scales 14, 15 and d).
      d[i].v = high_halves_f32(g.gather(w, at + offsetof(BlockQ6_K, d) - 2));
      for (int q = 0; q < 4; ++q) {
        const __m512i s4 = g.gather(w, at + offsetof(BlockQ6_K, scales) + 4 * q);
        for (int b = 0; b < 4; ++b) {
          sc[i * kSubs + 4 * q + b].v = _mm512_srai_epi32(_mm512_slli_epi32(s4, 24 - 8 * b), 24);
        }
      }
      for (int p = 0; p < kSubs / 2; ++p) {
        sc_pairs[i * kSubs / 2 + p].v = _mm512_or_si512(_mm512_and_si512(sc[i * kSubs + 2 * p].v, low16),
                                                        _mm512_slli_epi32(sc[i * kSubs + 2 * p + 1].v, 16));
      }
      for (int h = 0; h < 2; ++h) {
        for (int k0 = 0; k0 < 32; k0 += 16) {  // codes k0..k0+15 of each group: sub-blocks 8h + 2g + k0/16
          for (int r = 0; r < kSubLen / 4; ++r) {
            const int64_t k = k0 + 4 * r;
            const __m512i ql0 = g.gather(w, at + offsetof(BlockQ6_K, ql) + 64 * h + k);
            const __m512i ql1 = g.gather(w, at + offsetof(BlockQ6_K, ql) + 64 * h + 32 + k);
            const __m512i qh = g.gather(w, at + offsetof(BlockQ6_K, qh) + 32 * h + k);
            for (int grp = 0; grp < 4; ++grp) {
              const __m512i ql = (grp & 1) ? ql1 : ql0;
              const __m512i lo = _mm512_and_si512(grp >> 1 ? _mm512_srli_epi32(ql, 4) : ql, m4);
              // Bits 2g, 2g+1 of each qh byte moved to bits 4, 5 (what crosses bytes is masked off).
              const __m512i moved = grp <= 2 ? _mm512_slli_epi32(qh, 4 - 2 * grp) : _mm512_srli_epi32(qh, 2);
              const int s = 8 * h + 2 * grp + k0 / 16;
              _mm512_store_si512(b_tiles.tile(i * kSubs + s) + r * kRowBytes,
                                 _mm512_or_si512(lo, _mm512_and_si512(moved, m2_at_4)));
            }
          }
        }
      }
    }
  }

  __m512 accumulate(int64_t i, const CTiles* c, int a, const ActivationSums& sums, int row, __m512 acc) const {
    const __m512i s = scaled_sum(&sc[i * kSubs], c, a, kSubs);
    const __m512i offset = pair_dot(&sc_pairs[i * kSubs / 2], sums, row, i, kSubs / 2);
    const __m512i total = _mm512_sub_epi32(s, _mm512_slli_epi32(offset, 5));
    const __m512 dy = _mm512_set1_ps(sums.scale(row, i));
    return _mm512_fmadd_ps(_mm512_mul_ps(d[i].v, dy), _mm512_cvtepi32_ps(total), acc);
  }
};
}  // namespace

void dot_tile_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<Q6KGroup>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::amx
