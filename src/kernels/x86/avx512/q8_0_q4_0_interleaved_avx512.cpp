// Q8_0 and Q4_0 weights in the interleaved layout (interleave.h) × Q8_0 activations (read as
// BlockQ8_0F) on AVX-512 VNNI: decode (dot_outputs_interleaved) and batches (dot_rows_interleaved).
//
// A unit holds 16 rows' block words side by side, so one load gives the 16 rows' bytes 4k..4k+3 with
// no transpose. The blocks start with their 2-byte scale, so each word's codes sit 2 bytes off the
// activation's: word 0 is (d, d, c0, c1), word k (c4k−2 .. c4k+1) and the 2-byte tail (c30, c31) for
// Q8_0, shifted up to (0, 0, c30, c31). Each word meets the 4 activation codes at the same offset,
// broadcast from y.qs + 4k − 2 (word 0's first two bytes meet the scale's bytes, but its own scale
// bytes are zeroed first; the tail meets y.qs + 28). VPDPBUSD takes the weights unsigned, u = w + 128
// (Q8_0) or the nibble u = code + 8 (Q4_0, whose high nibbles meet the codes 16 further on), and each
// sum starts from −128·Σy (−8·Σy): the block's exact integer sum S. The float step per block is the
// scalar reference's, acc = acc + float(S)·(dw·dy) in block order, one row per lane: every output is
// bitwise what ref::dot_q8_0 / dot_q4_0 and the row layout's kernels give (invariant 7).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/x86/avx512/avx512_common.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/quant/blocks.h"

namespace infer::kernels::avx512 {

// Internal linkage, as avx512_common.h explains.
namespace {

inline __m512i words(int32_t v) { return _mm512_set1_epi32(v); }
// Word 0 without its scale bytes, and the tail moved to the high half: (0, 0, b0, b1) in every lane.
inline __m512i without_scale(__m512i w0) { return _mm512_and_si512(w0, words(static_cast<int32_t>(0xFFFF0000u))); }
inline __m512i tail_high(__m512i tail) { return _mm512_slli_epi32(tail, 16); }

// The 4 activation codes from y.qs + at broadcast (at = −2: the scale's last two bytes, then codes 0, 1).
inline __m512i codes_at(const BlockQ8_0F& y, int at) {
  return broadcast_word(reinterpret_cast<const int8_t*>(&y) + offsetof(BlockQ8_0F, qs) + at);
}

// Q8_0: 8 words and the tail, the codes biased to unsigned (an XOR with 0x80 of the code bytes).
struct Q8_0Sums {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr int32_t kOffset = 128;
  template <int NR>
  static void add(const InterleavedRows& src, int64_t b, const BlockQ8_0F* const (&y)[NR], __m512i (&s)[NR],
                  __m512i (&t)[NR]) {
    const __m512i bias = words(static_cast<int32_t>(0x80808080u));
    const __m512i first = without_scale(_mm512_xor_si512(src.word(b, 0), bias));
    for (int a = 0; a < NR; ++a) s[a] = _mm512_dpbusd_epi32(s[a], first, codes_at(y[a][b], -2));
#pragma GCC unroll 7
    for (int k = 1; k < 8; ++k) {
      const __m512i q = _mm512_xor_si512(src.word(b, 4 * k), bias);
      __m512i(&sum)[NR] = k % 2 ? t : s;
      for (int a = 0; a < NR; ++a) sum[a] = _mm512_dpbusd_epi32(sum[a], q, codes_at(y[a][b], 4 * k - 2));
    }
    const __m512i last = _mm512_xor_si512(tail_high(src.last_half(b)), words(static_cast<int32_t>(0x80800000u)));
    for (int a = 0; a < NR; ++a) t[a] = _mm512_dpbusd_epi32(t[a], last, codes_at(y[a][b], 28));
  }
};

// Q4_0: 4 words and the tail, each split into its low nibbles (codes j) and high ones (codes j + 16).
struct Q4_0Sums {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr int32_t kOffset = 8;
  template <int NR>
  static void nibbles(__m512i q, const BlockQ8_0F* const (&y)[NR], int64_t b, int at, __m512i (&s)[NR],
                      __m512i (&t)[NR]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi32(q, 4), m4);
    for (int a = 0; a < NR; ++a) {
      s[a] = _mm512_dpbusd_epi32(s[a], lo, codes_at(y[a][b], at));
      t[a] = _mm512_dpbusd_epi32(t[a], hi, codes_at(y[a][b], 16 + at));
    }
  }
  template <int NR>
  static void add(const InterleavedRows& src, int64_t b, const BlockQ8_0F* const (&y)[NR], __m512i (&s)[NR],
                  __m512i (&t)[NR]) {
    nibbles(without_scale(src.word(b, 0)), y, b, -2, s, t);
    for (int k = 1; k < 4; ++k) nibbles(src.word(b, 4 * k), y, b, 4 * k - 2, s, t);
    nibbles(tail_high(src.last_half(b)), y, b, 12, s, t);
  }
};

template <class Sums>
struct Kernels {
  // Block b of one group against activation rows y[0..NR) (off: their group of BlockOffsets).
  template <int NR>
  static void block(const InterleavedRows& src, const BlockQ8_0F* const (&y)[NR], const int32_t* off, int64_t b,
                    __m512 (&acc)[NR]) {
    // One row (decode) sums in two chains of VPDPBUSD (integers: exact in any order); NR rows are NR chains.
    __m512i s[NR], second[NR];
    __m512i(&t)[NR] = NR == 1 ? second : s;
    for (int a = 0; a < NR; ++a) {
      s[a] = words(off[b * BlockOffsets::kRows + a]);
      second[a] = _mm512_setzero_si512();
    }
    Sums::template add<NR>(src, b, y, s, t);
    if constexpr (NR == 1) s[0] = _mm512_add_epi32(s[0], second[0]);
    const __m512 dw = low_halves_f32(src.word_again(b, 0));
    for (int a = 0; a < NR; ++a) {
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(y[a][b].d));
      acc[a] = _mm512_add_ps(acc[a], _mm512_mul_ps(_mm512_cvtepi32_ps(s[a]), d));
    }
  }

  template <int NR>
  static void pass(const InterleavedRows& src, const BlockOffsets& off, const uint8_t* act, uint64_t act_stride,
                   int row0, float* out, int64_t out_stride) {
    const BlockQ8_0F* y[NR];
    __m512 acc[NR];
    for (int a = 0; a < NR; ++a) {
      y[a] = reinterpret_cast<const BlockQ8_0F*>(act + (row0 + a) * act_stride);
      acc[a] = _mm512_setzero_ps();
    }
    const int32_t* group = off.group(row0);
    for (int64_t b = 0; b < off.n_blocks; ++b) block<NR>(src, y, group, b, acc);
    for (int a = 0; a < NR; ++a) _mm512_storeu_ps(out + (row0 + a) * out_stride, acc[a]);
  }

  // Decode: decode_groups' walk, block<1> a block.
  static void dot_outputs(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                          float* out) {
    thread_local BlockOffsets off;
    off.build<BlockQ8_0F>(Sums::kOffset, act, 0, 1, n / kQK0);
    const BlockQ8_0F* const y[1] = {reinterpret_cast<const BlockQ8_0F*>(act)};
    decode_groups(static_cast<const uint8_t*>(w), row_bytes, n_w, Sums::kBlockBytes, off.n_blocks, out,
                  [&](const InterleavedRows& src, int64_t b, __m512& acc) {
                    __m512 one[1] = {acc};
                    block<1>(src, y, off.group(0), b, one);
                    acc = one[0];
                  });
  }

  // Batches of one pass: each group against the rows at once.
  static void dot_rows(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
    static_assert(kRowsPerPass == BlockOffsets::kRows);  // a pass reads one group of the offsets
    thread_local BlockOffsets off;
    off.build<BlockQ8_0F>(Sums::kOffset, act, act_stride, n_rows, n / kQK0);
    const auto* wb = static_cast<const uint8_t*>(w);
    for (int64_t g = 0; g < n_w / kGroupRows; ++g) {
      const InterleavedRows src(wb + g * kGroupRows * row_bytes, row_bytes, kGroupRows, Sums::kBlockBytes);
      float* o = out + g * kGroupRows;
      for (int a0 = 0; a0 < n_rows; a0 += kRowsPerPass) {
        switch (static_cast<int>(min_of(kRowsPerPass, n_rows - a0))) {
          case 1: pass<1>(src, off, act, act_stride, a0, o, out_stride); break;
          case 2: pass<2>(src, off, act, act_stride, a0, o, out_stride); break;
          case 3: pass<3>(src, off, act, act_stride, a0, o, out_stride); break;
          case 4: pass<4>(src, off, act, act_stride, a0, o, out_stride); break;
          case 5: pass<5>(src, off, act, act_stride, a0, o, out_stride); break;
          case 6: pass<6>(src, off, act, act_stride, a0, o, out_stride); break;
          case 7: pass<7>(src, off, act, act_stride, a0, o, out_stride); break;
          default: pass<8>(src, off, act, act_stride, a0, o, out_stride); break;
        }
      }
    }
  }
};
}  // namespace

void dot_outputs_interleaved_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out) {
  Kernels<Q8_0Sums>::dot_outputs(n, w, row_bytes, n_w, act, out);
}
void dot_rows_interleaved_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Kernels<Q8_0Sums>::dot_rows(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}
void dot_outputs_interleaved_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                  float* out) {
  Kernels<Q4_0Sums>::dot_outputs(n, w, row_bytes, n_w, act, out);
}
void dot_rows_interleaved_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Kernels<Q4_0Sums>::dot_rows(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx512
