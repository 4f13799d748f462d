// Q4_K and Q5_K weights × Q8_K activations on AVX-512 VNNI (avx512_q4_k.h), over the interleaved
// layout: the decode kernel and the small-batch kernel, no tiles (also for AVX-512 CPUs without AMX,
// such as AMD's Zen 4/5).
//
// VPDPBUSD dots each 16-row code vector with one activation word broadcast, and the super-block sums
// S = Σ_j sc_j·sum_j and M = Σ_j m_j·(bsums of sub-block j) are formed as exact integers, then take
// the float steps of the AVX2 kernels (avx2_common.h, hsum_rows_i32): every output is bitwise what
// they give. Q5_K is Q4_K's block with a fifth bit per code (qh) and the same scales, mins and steps.
#include "kernels/avx512_kernels.h"
#include "kernels/avx512_q4_k.h"

namespace infer::kernels::avx512 {

namespace {
template <bool kFiveBit>
struct KBlock {
  using type = BlockQ4_K;
};
template <>
struct KBlock<true> {
  using type = BlockQ5_K;
};

// Decode and small batches over the interleaved layout: super-block i of the 16 rows against NR
// activation rows y[a] (rows row0 + a of `sums`), VPDPBUSD with each activation word broadcast.
template <bool kFiveBit>
struct KDecode {
  using Block = typename KBlock<kFiveBit>::type;
  static constexpr int kSumGroupLen = 32;
  static constexpr int64_t kBlockBytes = sizeof(Block);
  static constexpr int64_t kCodes = offsetof(Block, qs);

  // The nibbles q plus 16 where bit `bit` of h's byte is set: the 5-bit codes.
  static __m512i with_fifth_bit(__m512i q, __m512i h, int bit) {
    const __mmask64 set = _mm512_test_epi8_mask(h, _mm512_set1_epi8(static_cast<char>(1 << bit)));
    return _mm512_mask_add_epi8(q, set, q, _mm512_set1_epi8(0x10));
  }

  template <int NR>
  static void block(const InterleavedRows& src, int64_t i, const BlockQ8_K* const* y, const ActivationSums& sums,
                    int row0, __m512* acc) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i sc[kSubs], min_pairs[kSubs / 2];
    decode_scales(src, i, sc, min_pairs);
    __m512i s[NR], h[kSubLen / 4];
    for (int a = 0; a < NR; ++a) s[a] = _mm512_setzero_si512();
    if constexpr (kFiveBit) {  // the fifth bits of all four chunks: read once
      for (int r = 0; r < kSubLen / 4; ++r) h[r] = src.word(i, offsetof(BlockQ5_K, qh) + 4 * r);
    }
    for (int c = 0; c < 4; ++c) {
      __m512i lo[NR], hi[NR];
      for (int a = 0; a < NR; ++a) lo[a] = hi[a] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int r = 0; r < kSubLen / 4; ++r) {
        const __m512i q = src.word(i, kCodes + 32 * c + 4 * r);
        __m512i q_lo = _mm512_and_si512(q, m4), q_hi = _mm512_and_si512(_mm512_srli_epi32(q, 4), m4);
        if constexpr (kFiveBit) {
          q_lo = with_fifth_bit(q_lo, h[r], 2 * c);
          q_hi = with_fifth_bit(q_hi, h[r], 2 * c + 1);
        }
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
using Q4KDecode = KDecode<false>;
using Q5KDecode = KDecode<true>;

}  // namespace

void dot_outputs_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out) {
  dot_outputs_interleaved<Q4KDecode>(n, w, row_bytes, n_w, act, out);
}

void dot_rows_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_rows_interleaved<Q4KDecode>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_outputs_interleaved_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out) {
  dot_outputs_interleaved<Q5KDecode>(n, w, row_bytes, n_w, act, out);
}

void dot_rows_interleaved_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_rows_interleaved<Q5KDecode>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx512
