// Q6_K weights × Q8_K activations on AVX-512/AMX (amx_common.h): the AMX tile kernel for batches of
// rows, over either layout, and the AVX-512 VNNI decode kernel over the interleaved layout.
//
// A super-block has 16 sub-blocks of 16 codes, each with a signed 8-bit scale. Element 128h + 32g + k
// (half h, group g, k < 32) is ql[64h + 32(g & 1) + k] >> 4(g >> 1) (low 4 bits) with
// (qh[32h + k] >> 2g) & 3 on top, and belongs to sub-block 8h + 2g + k/16. The codes are used unsigned
// (0..63) and the −32 offset is taken off as 32·Σ_s sc_s·bsums_s, which is exactly the AVX2 kernels'
// integer; the float step is theirs too (avx2_common.h, hsum_rows_i32), so every output is bitwise
// what they give.
#include "kernels/amx_common.h"
#include "kernels/amx_kernels.h"

namespace infer::kernels::amx {

namespace {
constexpr int kSubLen = 16;
constexpr int kSubs = kQKK / kSubLen;  // 16
constexpr int64_t kQl = offsetof(BlockQ6_K, ql), kQh = offsetof(BlockQ6_K, qh), kScales = offsetof(BlockQ6_K, scales);

// The 16 rows' codes of group g (0..3) for words ql0/ql1 (ql bytes 64h + k, 64h + 32 + k) and qh
// (bytes 32h + k): bits 2g, 2g+1 of each qh byte moved to bits 4, 5 (what crosses bytes is masked off).
inline __m512i codes(__m512i ql0, __m512i ql1, __m512i qh, int g) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2_at_4 = _mm512_set1_epi8(0x30);
  const __m512i ql = (g & 1) ? ql1 : ql0;
  const __m512i lo = _mm512_and_si512(g >> 1 ? _mm512_srli_epi32(ql, 4) : ql, m4);
  const __m512i moved = g <= 2 ? _mm512_slli_epi32(qh, 4 - 2 * g) : _mm512_srli_epi32(qh, 2);
  return _mm512_or_si512(lo, _mm512_and_si512(moved, m2_at_4));
}

// The 16 sub-block scales of super-block i (sign-extended) and their int16 pairs (sc[2p], sc[2p+1]).
// Inlined: out of line its 24 vectors went through the stack (BM_MatmulBatch Q6_K, three runs: 1 row
// 3.7-4.0 ms against 4.2-4.8, 8 rows 6.6 against 7.0; Q4_K's gains nothing).
template <class Source>
__attribute__((always_inline)) inline void decode_scales(const Source& src, int64_t i, __m512i* sc, __m512i* sc_pairs) {
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  for (int q = 0; q < 4; ++q) {
    const __m512i s4 = src.word(i, kScales + 4 * q);
    for (int b = 0; b < 4; ++b) sc[4 * q + b] = _mm512_srai_epi32(_mm512_slli_epi32(s4, 24 - 8 * b), 24);
  }
  for (int p = 0; p < kSubs / 2; ++p) {
    sc_pairs[p] = _mm512_or_si512(_mm512_and_si512(sc[2 * p], low16), _mm512_slli_epi32(sc[2 * p + 1], 16));
  }
}

// acc + (d·dy)·(S − 32·offset) for the 16 rows, in the AVX2 kernels' order. d: the rows' scales as
// floats, converted once for all the activation rows.
inline __m512 add_block(__m512 d, __m512i s, __m512i offset, float dy, __m512 acc) {
  const __m512i total = _mm512_sub_epi32(s, _mm512_slli_epi32(offset, 5));
  return _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dy)), _mm512_cvtepi32_ps(total), acc);
}

struct Q6KGroup {
  static constexpr int kSubLen = amx::kSubLen;
  static constexpr int kSubs = amx::kSubs;
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

// Decode and small batches over the interleaved layout: super-block i of the 16 rows against NR
// activation rows y[a] (rows row0 + a of `sums`), VPDPBUSD with each activation word broadcast. One
// sub-block at a time, so that NR accumulators suffice.
struct Q6KDecode {
  static constexpr int kSumGroupLen = 16;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);

  template <int NR>
  static void block(const InterleavedRows& src, int64_t i, const BlockQ8_K* const* y, const ActivationSums& sums,
                    int row0, __m512* acc) {
    __m512i sc[kSubs], sc_pairs[kSubs / 2];
    // The whole of a later unit, besides each word's own prefetch. Batches: unit i + 2 into L2
    // (BM_MatmulBatch Q6_K, 8 rows, 2 threads: Intel 5.7-6.0 ms against 5.8-6.3 without; Zen 5 3.1
    // against 4.4). Decode: unit i + 1 into L1 (Zen 5, 1 row: 1.71 against 2.02 ms, and the row
    // layout's AVX2 kernel takes 2.0; unit i + 2 2.6 against 2.9 while memory was slow; Q4_K gains
    // nothing from it: 1.16 against 1.03). On Intel unit i + 2 into L2 slowed decode (3.6-3.8 against
    // 3.4 ms); i + 1 into L1 is not measured there.
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
        // groups and kept in registers (1 row: 35 → 23 µs per 1024 × 1024, in L2). More rows need
        // the registers for their sums: read again per group, from L1 (8 rows, 1024 × 151,936: 6.4 ms
        // this way, 7.1-7.7 kept).
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
              code = codes(kept[0][r], kept[1][r], kept[2][r], g);
            } else {
              code = codes(word(0, r, g == 0), word(1, r, g == 0), word(2, r, g == 0), g);
            }
            for (int a = 0; a < NR; ++a) {
              sum[a] = _mm512_dpbusd_epi32(sum[a], code, broadcast_word(y[a][i].qs + 128 * h + 32 * g + k0 + 4 * r));
            }
          }
          const __m512i scale = scale_words(sc[8 * h + 2 * g + k0 / kSubLen]);
          for (int a = 0; a < NR; ++a) s[a] = add_scaled(s[a], sum[a], scale);
        }
      }
    }
    const __m512 d = low_halves_f32(src.last_half(i));
    for (int a = 0; a < NR; ++a) {
      acc[a] = add_block(d, s[a], pair_dot(sc_pairs, sums, row0 + a, i, kSubs / 2), y[a][i].d, acc[a]);
    }
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

void dot_outputs_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out) {
  dot_outputs_interleaved<Q6KDecode>(n, w, row_bytes, n_w, act, out);
}

void dot_rows_interleaved_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_rows_interleaved<Q6KDecode>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::amx
