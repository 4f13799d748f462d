// Q4_K and Q5_K weights × Q8_K activations on AVX-512 VNNI (avx512_q4_k.h), over the interleaved
// layout: the decode kernel, the small-batch kernel and, for larger batches, the unpacked tile
// (k_tile_avx512.h); no AMX (also for AVX-512 CPUs without it, such as AMD's Zen 4/5).
//
// VPDPBUSD dots each 16-row code vector with one activation word broadcast, and the super-block sums
// S = Σ_j sc_j·sum_j and M = Σ_j m_j·(bsums of sub-block j) are formed as exact integers, then take
// the float steps of the AVX2 kernels (avx2_common.h, hsum_rows_i32): every output is bitwise what
// they give. Q5_K is Q4_K's block with a fifth bit per code (qh) and the same scales, mins and steps.
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_q4_k.h"
#include "kernels/x86/avx512/k_tile_avx512.h"

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

// Decode and small batches over the interleaved layout: super-block i of NG groups of 16 rows against
// NR activation rows (rows row0 + a of `sums`, codes at x + a · kQKK), VPDPBUSD with each activation
// word broadcast. A group alone takes a chunk's two sub-blocks at once; full passes of two groups take
// one sub-block at a time, each broadcast serving both groups' code vectors (the broadcasts bound the
// one-group kernel: bench_kernels BM_MatmulBatchHot/12/8), with the scaled sums and the scales in memory
// so that the 16 accumulators keep the registers.
template <bool kFiveBit>
struct KDecode {
  using Block = typename KBlock<kFiveBit>::type;
  static constexpr int kSumGroupLen = 32;
  static constexpr int64_t kBlockBytes = sizeof(Block);
  static constexpr bool kPairGroups = true;
  static constexpr int64_t kCodes = offsetof(Block, qs);
  static constexpr int64_t kFifthBits = offsetof(BlockQ5_K, qh);

  // The nibbles q plus 16 where bit `bit` of h's byte is set: the 5-bit codes.
  static __m512i with_fifth_bit(__m512i q, __m512i h, int bit) {
    const __mmask64 set = _mm512_test_epi8_mask(h, _mm512_set1_epi8(static_cast<char>(1 << bit)));
    return _mm512_mask_add_epi8(q, set, q, _mm512_set1_epi8(0x10));
  }

  // The fifth bits of super-block i's four chunks (Q5_K; nothing for Q4_K).
  static void fifth_bits(const InterleavedRows& src, int64_t i, __m512i* h) {
    if constexpr (kFiveBit) {
      for (int r = 0; r < kSubLen / 4; ++r) h[r] = src.word(i, kFifthBits + 4 * r);
    }
  }

  // The 16 rows' codes in word r of chunk c (q): lo of sub-block 2c, hi of sub-block 2c + 1.
  static void codes(__m512i q, const __m512i* h, int c, int r, __m512i& lo, __m512i& hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    lo = _mm512_and_si512(q, m4);
    hi = _mm512_and_si512(_mm512_srli_epi32(q, 4), m4);
    if constexpr (kFiveBit) {
      lo = with_fifth_bit(lo, h[r], 2 * c);
      hi = with_fifth_bit(hi, h[r], 2 * c + 1);
    }
  }

  // The 16 rows' codes 32j + 4r .. 32j + 4r + 3 (sub-block j): the low nibbles of chunk j / 2's word r
  // for even j, the high ones for odd j, which reads the word again (and the fifth bits, Q5_K).
  static __m512i sub_block_codes(const InterleavedRows& src, int64_t i, int j, int r) {
    const int64_t at = kCodes + 32 * (j / 2) + 4 * r;
    const __m512i q = j % 2 ? _mm512_srli_epi32(src.word_again(i, at), 4) : src.word(i, at);
    const __m512i codes = _mm512_and_si512(q, _mm512_set1_epi8(0x0F));
    if constexpr (kFiveBit) {
      const int64_t h_at = kFifthBits + 4 * r;
      return with_fifth_bit(codes, j == 0 ? src.word(i, h_at) : src.word_again(i, h_at), j);
    }
    return codes;
  }

  template <int NR>
  static void block_of_group(const InterleavedRows& src, int64_t i, const int8_t* x, const ActivationSums& sums,
                             int row0, __m512* acc) {
    __m512i sc[kSubs], min_pairs[kSubs / 2];
    decode_scales(src, i, sc, min_pairs);
    __m512i s[NR], h[kSubLen / 4];
    for (int a = 0; a < NR; ++a) s[a] = _mm512_setzero_si512();
    fifth_bits(src, i, h);  // read once for all four chunks
    for (int c = 0; c < 4; ++c) {
      __m512i lo[NR], hi[NR];
      for (int a = 0; a < NR; ++a) lo[a] = hi[a] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int r = 0; r < kSubLen / 4; ++r) {
        __m512i q_lo, q_hi;
        codes(src.word(i, kCodes + 32 * c + 4 * r), h, c, r, q_lo, q_hi);
        for (int a = 0; a < NR; ++a) {
          lo[a] = _mm512_dpbusd_epi32(lo[a], q_lo, broadcast_word(x + a * kQKK + 64 * c + 4 * r));
          hi[a] = _mm512_dpbusd_epi32(hi[a], q_hi, broadcast_word(x + a * kQKK + 64 * c + kSubLen + 4 * r));
        }
      }
      const __m512i sc_lo = scale_words(sc[2 * c]), sc_hi = scale_words(sc[2 * c + 1]);
      for (int a = 0; a < NR; ++a) s[a] = add_scaled(add_scaled(s[a], lo[a], sc_lo), hi[a], sc_hi);
    }
    const BlockScales scales(src.word(i, 0));
    for (int a = 0; a < NR; ++a) {
      acc[a] = add_block(scales, s[a], pair_dot(min_pairs, sums, row0 + a, i, kSubs / 2), sums.scale(row0 + a, i),
                         acc[a]);
    }
  }

  template <int NR, int NG>
  static void block(const InterleavedRows* src, int64_t i, const int8_t* x, const ActivationSums& sums, int row0,
                    __m512* acc) {
    if constexpr (NG == 1 || NR < 8) {
      for (int g = 0; g < NG; ++g) block_of_group<NR>(src[g], i, x, sums, row0, acc + g * NR);
      return;
    }
    alignas(64) __m512i scale[NG][kSubs], min_pairs[NG][kSubs / 2], s[NG][NR];
    for (int g = 0; g < NG; ++g) {
      __m512i sc[kSubs];
      decode_scales(src[g], i, sc, min_pairs[g]);
      for (int j = 0; j < kSubs; ++j) scale[g][j] = scale_words(sc[j]);
      for (int a = 0; a < NR; ++a) s[g][a] = _mm512_setzero_si512();
    }
    for (int j = 0; j < kSubs; ++j) {
      __m512i sum[NG][NR];
      for (auto& group : sum) {
        for (__m512i& v : group) v = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int r = 0; r < kSubLen / 4; ++r) {
        __m512i q[NG];
        for (int g = 0; g < NG; ++g) q[g] = sub_block_codes(src[g], i, j, r);
        for (int a = 0; a < NR; ++a) {
          const __m512i yw = broadcast_word(x + a * kQKK + kSubLen * j + 4 * r);
          for (int g = 0; g < NG; ++g) sum[g][a] = _mm512_dpbusd_epi32(sum[g][a], q[g], yw);
        }
      }
      for (int g = 0; g < NG; ++g) {
        for (int a = 0; a < NR; ++a) s[g][a] = add_scaled(s[g][a], sum[g][a], scale[g][j]);
      }
    }
    for (int g = 0; g < NG; ++g) {
      const BlockScales scales(src[g].word(i, 0));
      for (int a = 0; a < NR; ++a) {
        __m512& out = acc[g * NR + a];
        out = add_block(scales, s[g][a], pair_dot(min_pairs[g], sums, row0 + a, i, kSubs / 2), sums.scale(row0 + a, i),
                        out);
      }
    }
  }
};
using Q4KDecode = KDecode<false>;
using Q5KDecode = KDecode<true>;

// Larger batches: the tile's Format (k_tile_avx512.h), the same codes and steps from unpacked units.
template <bool kFiveBit>
struct KUnpack {
  using Decode = KDecode<kFiveBit>;
  using Unit = KUnpackedUnit<kSubs>;
  static constexpr int kSumGroupLen = Decode::kSumGroupLen;
  static constexpr int64_t kBlockBytes = Decode::kBlockBytes;

  static void unpack(const InterleavedRows& src, int64_t i, Unit& u) {
    __m512i sc[kSubs], min_pairs[kSubs / 2], h[kSubLen / 4];
    decode_scales(src, i, sc, min_pairs);
    for (int j = 0; j < kSubs; ++j) u.scale_words[j].v = scale_words(sc[j]);
    for (int p = 0; p < kSubs / 2; ++p) u.pairs[p].v = min_pairs[p];
    const BlockScales scales(src.word(i, 0));
    u.d.v = scales.d;
    u.dmin.v = scales.dmin;
    Decode::fifth_bits(src, i, h);
    for (int c = 0; c < 4; ++c) {
      for (int r = 0; r < kSubLen / 4; ++r) {
        Decode::codes(src.word(i, Decode::kCodes + 32 * c + 4 * r), h, c, r, u.codes[16 * c + r].v,
                      u.codes[16 * c + 8 + r].v);
      }
    }
  }

  static __m512 add_unit(const Unit& u, __m512i s, const ActivationSums& sums, int row, int64_t i, float dy,
                         __m512 acc) {
    BlockScales scales;
    scales.d = u.d.v;
    scales.dmin = u.dmin.v;
    return add_block(scales, s, pair_dot(u.pairs, sums, row, i, kSubs / 2), dy, acc);
  }
};

}  // namespace

void dot_outputs_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out) {
  dot_outputs_interleaved<Q4KDecode>(n, w, row_bytes, n_w, act, out);
}

void dot_rows_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_rows_interleaved<Q4KDecode>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_vnni_interleaved_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile_unpacked<KUnpack<false>>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_outputs_interleaved_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out) {
  dot_outputs_interleaved<Q5KDecode>(n, w, row_bytes, n_w, act, out);
}

void dot_rows_interleaved_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_rows_interleaved<Q5KDecode>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_vnni_interleaved_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile_unpacked<KUnpack<true>>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx512
