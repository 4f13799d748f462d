// Q6_K weights × Q8_K activations on AMX tiles (amx_common.h): the tile kernel for batches of rows,
// over either layout. Per group of 16 weight rows, every super-block's codes are laid out once as B
// tiles (one per 16-code sub-block); TDPBSUD then gives every (activation row, weight row, sub-block)
// integer sum exactly, and the float steps are the VNNI kernels' (avx512_q6_k.h): every output is
// bitwise what they give.
#include "kernels/x86/amx/amx_common.h"
#include "kernels/x86/amx/amx_kernels.h"
#include "kernels/x86/avx512/avx512_q6_k.h"

namespace infer::kernels::amx {

namespace {
struct Q6KGroup {
  static constexpr int kSubLen = avx512::kSubLen;
  static constexpr int kSubs = avx512::kSubs;
  static constexpr int kSumGroupLen = 16;  // the offset applies per sub-block
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);
  static constexpr int kBTileBytes = kSubLen / 4 * kRowBytes;

  BTiles b_tiles;        // [block][sub-block]
  Buffer<Zmm> sc;        // [block][sub-block], sign-extended
  Buffer<Zmm> sc_pairs;  // [block][pair]
  Buffer<Zmm> d_half;    // [block]: d in the low halves

  const uint8_t* b_tile(int64_t i, int j) const { return b_tiles.tile(i * kSubs + j); }

  template <class Source>
  void unpack(const Source& src, int64_t n_blocks) {
    b_tiles.resize(n_blocks * kSubs, kBTileBytes);
    sc.resize(static_cast<size_t>(n_blocks * kSubs));
    sc_pairs.resize(static_cast<size_t>(n_blocks * kSubs / 2));
    d_half.resize(static_cast<size_t>(n_blocks));
    for (int64_t i = 0; i < n_blocks; ++i) {
      src.prefetch(i);
      d_half[i].v = src.last_half(i);
      __m512i s[kSubs], sp[kSubs / 2];
      decode_scales(src, i, s, sp);
      for (int j = 0; j < kSubs; ++j) sc[i * kSubs + j].v = s[j];
      for (int p = 0; p < kSubs / 2; ++p) sc_pairs[i * kSubs / 2 + p].v = sp[p];
      for (int h = 0; h < 2; ++h) {
        for (int k0 = 0; k0 < 32; k0 += kSubLen) {  // codes k0..k0+15 of each group: sub-blocks 8h + 2g + k0/16
          for (int r = 0; r < kSubLen / 4; ++r) {
            const int64_t k = k0 + 4 * r;
            const __m512i ql0 = src.word(i, kQl + 64 * h + k), ql1 = src.word(i, kQl + 64 * h + 32 + k);
            const __m512i qh = src.word(i, kQh + 32 * h + k);
            for (int g = 0; g < 4; ++g) {
              const int sub = 8 * h + 2 * g + k0 / kSubLen;
              _mm512_store_si512(b_tiles.tile(i * kSubs + sub) + r * kRowBytes, codes(ql0, ql1, qh, g));
            }
          }
        }
      }
    }
  }

  __m512 accumulate(int64_t i, const CTiles* c, int a, const ActivationSums& sums, int row, __m512 acc) const {
    const __m512i s = scaled_sum(&sc[i * kSubs], c, a, kSubs);
    const __m512i offset = pair_dot(&sc_pairs[i * kSubs / 2], sums, row, i, kSubs / 2);
    return add_block(low_halves_f32(d_half[i].v), s, offset, sums.scale(row, i), acc);
  }
};

}  // namespace

void dot_tile_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<Q6KGroup, GatheredRows>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<Q6KGroup, InterleavedRows>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::amx
