// Q6_K weights × Q8_K activations on AVX-512 VNNI (avx512_q6_k.h), over the interleaved layout: the
// decode kernel, the small-batch kernel and, for larger batches, the unpacked tile (k_tile_avx512.h);
// no AMX (also for AVX-512 CPUs without it, such as AMD's Zen 4/5).
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/x86/avx512/avx512_q6_k.h"
#include "kernels/x86/avx512/k_tile_avx512.h"

namespace infer::kernels::avx512 {

namespace {
// Decode and small batches over the interleaved layout: super-block i of the 16 rows against NR
// activation rows (rows row0 + a of `sums`, codes at x + a · kQKK), VPDPBUSD with each activation word
// broadcast. One sub-block at a time, so that NR accumulators suffice. Groups one at a time: two groups
// sharing each broadcast, as Q4_K's, made 8 rows slower (bench_kernels BM_MatmulBatchHot/14/8).
struct Q6KDecode {
  static constexpr int kSumGroupLen = 16;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);
  static constexpr bool kPairGroups = false;

  template <int NR>
  static void block_of_group(const InterleavedRows& src, int64_t i, const int8_t* x, const ActivationSums& sums,
                             int row0, __m512* acc) {
    __m512i sc[kSubs], sc_pairs[kSubs / 2];
    // The whole of a later unit, besides each word's own prefetch: unit i + 2 into L2 for batches,
    // unit i + 1 into L1 for decode, where i + 2 into L2 slowed Intel; Q4_K gains nothing from it
    // (BM_MatmulBatch; docs/performance.md, Constants).
    if constexpr (NR > 1) {
      src.prefetch_unit_to_l2(i + 2);
    } else {
      src.prefetch_unit_to_l1<kBlockBytes>(i + 1);
    }
    decode_scales(src, i, sc, sc_pairs);
    __m512i s[NR];
    for (int a = 0; a < NR; ++a) s[a] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      for (int k0 = 0; k0 < 32; k0 += kSubLen) {
        // The words of codes k0..k0+15: (ql, ql + 32, qh) for each r. Few rows: read once for the 4
        // groups and kept in registers. More rows need the registers for their sums: read again per
        // group, from L1 (BM_MatmulBatchHot, BM_MatmulBatch; docs/performance.md, Constants).
        constexpr bool kKeepWords = NR <= 2;
        auto word = [&](int which, int r, bool first = true) {
          const int64_t at = (which == 2 ? kQh + 32 * h : kQl + 64 * h + 32 * which) + k0 + 4 * r;
          return first ? src.word(i, at) : src.word_again(i, at);
        };
        __m512i kept[3][kSubLen / 4];
        if constexpr (kKeepWords) {
          for (int r = 0; r < kSubLen / 4; ++r) {
            for (int which = 0; which < 3; ++which) kept[which][r] = word(which, r);
          }
        }
        // Unrolled: codes() then shifts by constants, and only the first read of a word prefetches.
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          __m512i sum[NR];
          for (int a = 0; a < NR; ++a) sum[a] = _mm512_setzero_si512();
          for (int r = 0; r < kSubLen / 4; ++r) {
            __m512i code;
            if constexpr (kKeepWords) {
              code = codes<true>(kept[0][r], kept[1][r], kept[2][r], g);
            } else {
              code = codes(word(0, r, g == 0), word(1, r, g == 0), word(2, r, g == 0), g);
            }
            for (int a = 0; a < NR; ++a) {
              sum[a] = _mm512_dpbusd_epi32(sum[a], code, broadcast_word(x + a * kQKK + 128 * h + 32 * g + k0 + 4 * r));
            }
          }
          const __m512i scale = scale_words(sc[8 * h + 2 * g + k0 / kSubLen]);
          for (int a = 0; a < NR; ++a) s[a] = add_scaled(s[a], sum[a], scale);
        }
      }
    }
    const __m512 d = low_halves_f32(src.last_half(i));
    for (int a = 0; a < NR; ++a) {
      acc[a] = add_block(d, s[a], pair_dot(sc_pairs, sums, row0 + a, i, kSubs / 2), sums.scale(row0 + a, i), acc[a]);
    }
  }

  template <int NR, int NG>
  static void block(const InterleavedRows* src, int64_t i, const int8_t* x, const ActivationSums& sums, int row0,
                    __m512* acc) {
    for (int g = 0; g < NG; ++g) block_of_group<NR>(src[g], i, x, sums, row0, acc + g * NR);
  }
};

// Larger batches: the tile's Format (k_tile_avx512.h), the same codes and steps from unpacked units.
struct Q6KUnpack {
  using Unit = KUnpackedUnit<kSubs>;
  static constexpr int kSumGroupLen = Q6KDecode::kSumGroupLen;
  static constexpr int64_t kBlockBytes = Q6KDecode::kBlockBytes;

  static void unpack(const InterleavedRows& src, int64_t i, Unit& u) {
    __m512i sc[kSubs], sc_pairs[kSubs / 2];
    decode_scales(src, i, sc, sc_pairs);
    for (int j = 0; j < kSubs; ++j) u.scale_words[j].v = scale_words(sc[j]);
    for (int p = 0; p < kSubs / 2; ++p) u.pairs[p].v = sc_pairs[p];
    u.d.v = low_halves_f32(src.last_half(i));
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 32; k += 4) {  // element 128h + 32g + k is code vector 32h + 8g + k/4
        const __m512i ql0 = src.word(i, kQl + 64 * h + k), ql1 = src.word(i, kQl + 64 * h + 32 + k);
        const __m512i qh = src.word(i, kQh + 32 * h + k);
        for (int g = 0; g < 4; ++g) u.codes[32 * h + 8 * g + k / 4].v = codes(ql0, ql1, qh, g);
      }
    }
  }

  static __m512 add_unit(const Unit& u, __m512i s, const ActivationSums& sums, int row, int64_t i, float dy,
                         __m512 acc) {
    return add_block(u.d.v, s, pair_dot(u.pairs, sums, row, i, kSubs / 2), dy, acc);
  }
};
}  // namespace

void dot_outputs_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out) {
  dot_outputs_interleaved<Q6KDecode>(n, w, row_bytes, n_w, act, out);
}

void dot_rows_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_rows_interleaved<Q6KDecode>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_vnni_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile_unpacked<Q6KUnpack>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx512
