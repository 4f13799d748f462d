// The AVX2 kernels of the 32-element block formats that meet Q8_0 activations (Q8_0, Q4_0:
// q8_0_q4_0_avx2.cpp; Q5_0, Q5_1: q5_0_q5_1_avx2.cpp), over one Codes view of each format. Per
// (weight row, activation row), in block order: acc = acc + term with term = float(S)·(dw·dy) (plus
// m·(dy·Σy) for Q5_1's minimum) and S the block's exact integer sum, the arithmetic of the scalar
// references, so every kernel shape (decode streams, batch tiles, dot_rows) is bitwise the reference
// (invariant 7).
// The batch tiles take weight rows 8 at a time, one row per lane: a block's 32 codes of the 8 rows are
// transposed once into 8 vectors (vector k holds codes 4k..4k+3 of every row), so one broadcast of 4
// activation codes and one maddubs serve 8 rows, with no float work until the block's end.
// Decode takes 4 weight rows, each a long sequential stream, 2 blocks at a time: the 8 (row, block)
// sums come out of one horizontal-add tree in 8 lanes, each row's 2 terms added in block order.
// Include only in *_avx2.cpp files; internal linkage, as tile_group.h explains.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/block_codes.h"
#include "kernels/quant/blocks.h"
#include "kernels/x86/tile_group.h"
#include "kernels/x86/word_transpose.h"

namespace infer::kernels::avx2 {
namespace {

inline constexpr int kGroupRows = 8;  // weight rows per group: one per 32-bit lane
// Decode: weight rows read side by side, each its own stream, prefetched this far ahead. More streams
// (8 rows per pass) or adjacent rows read slower (infer bench tg64, qwen3-0.6b Q8_0 and Q4_0, Zen 3).
inline constexpr int kDecodeStreams = 4;
inline constexpr int kDecodePrefetchBytes = 2048;
// Batch: activation rows per tile, about this many bytes of them (stay in L2 while the groups pass).
inline constexpr uint64_t kActTileBytes = 160 * 1024;
inline constexpr int kTileRows = 4;  // activation rows a pass over a group's scratch

// One block of a group of 8 weight rows: codes[k] holds codes 4k..4k+3 of rows 0..7 (as Codes::row
// gives them), dw the rows' scales; GroupBlockMin adds their minimums (Q5_1).
struct alignas(32) GroupBlock {
  __m256i codes[8];
  __m256 dw;
};
struct alignas(32) GroupBlockMin : GroupBlock {
  __m256 m;
};

// A Codes view gives: Block; Act, the activation block (BlockQ8_0F, or BlockQ8_1F with Σy);
// row(block), its 32 codes as one vector; kSigned: the codes are signed (Q8_0: the product takes
// maddubs(|w|, sign(y, w))), else unsigned (maddubs(u, y) needs no sign step); kBias: w = u − kBias
// (S = Σu·y − kBias·Σy); kInt16Steps: 4-code steps whose maddubs sums add up in int16 before a madd
// (2·max(u)·128 each); kMin: the block has a minimum m (w = u·d + m).
template <class Codes>
struct Groups {
  using Block = typename Codes::Block;
  using Act = typename Codes::Act;
  using Group = std::conditional_t<Codes::kMin, GroupBlockMin, GroupBlock>;
  static constexpr bool kOffset = Codes::kBias != 0;

  // kBias·Σy of an activation block.
  static int32_t offset_term(const Act& y) { return Codes::kBias * sum_i8(load(y.qs)); }

  // The block's term from its exact sum: float(S)·(dw·dy), plus m·(dy·Σy) where the format has a
  // minimum, each rounded as the reference rounds it (ref::dot_q5_1); dys is dy·Σy.
  static __m256 term(__m256i sum, __m256 dwdy, __m256 m, __m256 dys) {
    const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), dwdy);
    if constexpr (Codes::kMin) return _mm256_add_ps(t, _mm256_mul_ps(m, dys));
    return t;
  }
  static float dys(const Act& y) {
    if constexpr (Codes::kMin) return y.d * y.s;
    return 0.0f;
  }

  // Block b of rows x[0..7] into g: an 8×8 transpose of 32-bit words.
  static void transpose(const Block* const (&x)[kGroupRows], int64_t b, Group& g) {
    __m256i r[8];
    for (int i = 0; i < 8; ++i) r[i] = Codes::row(x[i][b]);
    transpose_words8(r, g.codes);
    const Block* blk[8];
    for (int i = 0; i < 8; ++i) blk[i] = &x[i][b];
    g.dw = block_scales8(blk);
    if constexpr (Codes::kMin) g.m = block_scales8(blk, &Block::m);
  }

  // acc[r] = acc[r] + term for the group's block g and activation blocks y[r]; offset[r] = kBias·Σy[r].
  template <int NR>
  static void accumulate(const Group& g, const Act* const (&y)[NR], const int32_t (&offset)[NR], __m256 (&acc)[NR]) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s[NR];
    for (int r = 0; r < NR; ++r) s[r] = _mm256_setzero_si256();
    if constexpr (Codes::kSigned) {
      // Two steps a loop: GCC unrolled all 8 and spilled their sums to the stack (bench_kernels
      // BM_MatmulPrefill Q8_0 and Q4_0 with INFER_NO_AVX512=1).
#pragma GCC unroll 2
      for (int k = 0; k < 8; ++k) {
        const __m256i w = g.codes[k];
        const __m256i wabs = _mm256_sign_epi8(w, w);
        for (int r = 0; r < NR; ++r) {
          const __m256i yk = _mm256_sign_epi8(_mm256_set1_epi32(load_word(y[r]->qs + 4 * k)), w);
          s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, yk), ones));
        }
      }
    } else {
      for (int k0 = 0; k0 < 8; k0 += Codes::kInt16Steps) {
        __m256i s16[NR];
        for (int r = 0; r < NR; ++r) s16[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int k = k0; k < k0 + Codes::kInt16Steps; ++k) {
          const __m256i w = g.codes[k];
          for (int r = 0; r < NR; ++r) {
            const __m256i yk = _mm256_set1_epi32(load_word(y[r]->qs + 4 * k));
            s16[r] = _mm256_add_epi16(s16[r], _mm256_maddubs_epi16(w, yk));
          }
        }
        for (int r = 0; r < NR; ++r) s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(s16[r], ones));
      }
    }
    for (int r = 0; r < NR; ++r) {
      __m256i sum = s[r];
      if constexpr (kOffset) sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(offset[r]));
      __m256 m = _mm256_setzero_ps();
      if constexpr (Codes::kMin) m = g.m;
      const __m256 t = term(sum, _mm256_mul_ps(g.dw, _mm256_set1_ps(y[r]->d)), m, _mm256_set1_ps(dys(*y[r])));
      acc[r] = _mm256_add_ps(acc[r], t);
    }
  }

  // The exact integer sums of 8 weight blocks with activation codes yq[0..7], lane k for pair k
  // (before the bias term): each pair's products summed by a horizontal-add tree over the pairs. A
  // single activation row takes this instead of a transpose, which only pays off when several rows
  // read it.
  static __m256i sums8(const Block* const (&blk)[8], const __m256i (&yq)[8]) {
    __m256i p[8];
    if constexpr (!Codes::kSigned && Codes::kInt16Steps == 8) {
      // Codes within 15 (Q4_0): a product is within 15·128, so int16 lanes hold sums of 16; three
      // levels of pairwise adds leave lane k of each half with pair k's sum over that half's 16 codes.
      for (int k = 0; k < 8; ++k) p[k] = _mm256_maddubs_epi16(Codes::row(*blk[k]), yq[k]);
      const __m256i h03 = _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3]));
      const __m256i h47 = _mm256_hadd_epi16(_mm256_hadd_epi16(p[4], p[5]), _mm256_hadd_epi16(p[6], p[7]));
      const __m256i h = _mm256_hadd_epi16(h03, h47);
      return _mm256_add_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(h)),
                              _mm256_cvtepi16_epi32(_mm256_extracti128_si256(h, 1)));
    } else {
      const __m256i ones = _mm256_set1_epi16(1);
      for (int k = 0; k < 8; ++k) {
        const __m256i w = Codes::row(*blk[k]);
        __m256i prod;
        if constexpr (Codes::kSigned) {
          prod = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(yq[k], w));
        } else {
          prod = _mm256_maddubs_epi16(w, yq[k]);
        }
        p[k] = _mm256_madd_epi16(prod, ones);
      }
      const __m256i h03 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
      const __m256i h47 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
      return _mm256_add_epi32(_mm256_permute2x128_si256(h03, h47, 0x20), _mm256_permute2x128_si256(h03, h47, 0x31));
    }
  }

  // The minimums of 8 blocks (Q5_1), else zeros.
  static __m256 mins8(const Block* const (&blk)[8]) {
    if constexpr (Codes::kMin) return block_scales8(blk, &Block::m);
    return _mm256_setzero_ps();
  }

  // What a decode step takes from the activation row for blocks b0 and b1, formed once per call:
  // their scales, bias terms kBias·Σy and dy·Σy, lanes 0..3 for b0 and 4..7 for b1.
  struct alignas(32) StepAct {
    __m256 dy;
    __m256i offset;
    __m256 dys;
  };

  static StepAct step_act(const Act* y, int64_t b0, int64_t b1) {
    StepAct a;
    a.dy = _mm256_setr_m128(_mm_set1_ps(y[b0].d), _mm_set1_ps(y[b1].d));
    a.offset = _mm256_setzero_si256();
    if constexpr (kOffset) {
      a.offset = _mm256_setr_m128i(_mm_set1_epi32(offset_term(y[b0])), _mm_set1_epi32(offset_term(y[b1])));
    }
    a.dys = _mm256_setr_m128(_mm_set1_ps(dys(y[b0])), _mm_set1_ps(dys(y[b1])));
    return a;
  }

  // Lanes 0..3: the terms of block b0 of rows x[0..3]; lanes 4..7: of block b1.
  static __m256 terms(const Block* const (&x)[kDecodeStreams], int64_t b0, int64_t b1, const Act* y,
                      const StepAct& a) {
    const Block* blk[8];
    __m256i yq[8];
    const __m256i y0 = load(y[b0].qs), y1 = load(y[b1].qs);
    for (int i = 0; i < 4; ++i) blk[i] = &x[i][b0], blk[i + 4] = &x[i][b1], yq[i] = y0, yq[i + 4] = y1;
    __m256i sum = sums8(blk, yq);
    if constexpr (kOffset) sum = _mm256_sub_epi32(sum, a.offset);
    return term(sum, _mm256_mul_ps(block_scales8(blk), a.dy), mins8(blk), a.dys);
  }

  // Rows x[0..3] against activation row y over all blocks: acc = acc + term, block by block.
  static __m128 decode_rows(int64_t nb, const Block* const (&x)[kDecodeStreams], const Act* y, const StepAct* act,
                            bool prefetch) {
    __m128 acc = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      if (prefetch) {
        for (const Block* r : x) _mm_prefetch(reinterpret_cast<const char*>(r + b) + kDecodePrefetchBytes, _MM_HINT_T0);
      }
      const __m256 t = terms(x, b, b + 1, y, act[b / 2]);
      acc = _mm_add_ps(_mm_add_ps(acc, _mm256_castps256_ps128(t)), _mm256_extractf128_ps(t, 1));
    }
    if (b < nb) acc = _mm_add_ps(acc, _mm256_castps256_ps128(terms(x, b, b, y, act[b / 2])));
    return acc;
  }

  // Decode: one activation row against weight rows [0, n_w): 4 streams of n_w / 4 rows side by side
  // (lane i: row o + i·part), then the remaining rows as one group (rows past n_w repeat the last).
  static void dot_outputs(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const auto* y = reinterpret_cast<const Act*>(act);
    const int64_t nb = n / kQK0;
    thread_local std::vector<StepAct> steps;
    if (static_cast<int64_t>(steps.size()) < (nb + 1) / 2) steps.resize((nb + 1) / 2);
    for (int64_t b = 0; b < nb; b += 2) steps[b / 2] = step_act(y, b, std::min(b + 1, nb - 1));
    const StepAct* sa = steps.data();
    const int64_t part = n_w / kDecodeStreams;
    alignas(16) float lanes[kDecodeStreams];
    for (int64_t o = 0; o < part; ++o) {
      const Block* x[kDecodeStreams];
      for (int i = 0; i < kDecodeStreams; ++i) x[i] = reinterpret_cast<const Block*>(wb + (o + i * part) * row_bytes);
      _mm_store_ps(lanes, decode_rows(nb, x, y, sa, true));
      for (int i = 0; i < kDecodeStreams; ++i) out[o + i * part] = lanes[i];
    }
    if (const int64_t o = kDecodeStreams * part; o < n_w) {
      const Block* x[kDecodeStreams];
      for (int i = 0; i < kDecodeStreams; ++i) {
        x[i] = reinterpret_cast<const Block*>(wb + std::min(o + i, n_w - 1) * row_bytes);
      }
      _mm_store_ps(lanes, decode_rows(nb, x, y, sa, false));
      for (int64_t i = 0; i < n_w - o; ++i) out[o + i] = lanes[i];
    }
  }

  // acc = acc + term for block b of rows x[0..7] and activation block y (lane i: row i).
  static __m256 add_block(const Block* const (&x)[kGroupRows], int64_t b, const Act& y, __m256 acc) {
    const Block* blk[8];
    __m256i y8[8];
    const __m256i yq = load(y.qs);
    for (int i = 0; i < 8; ++i) blk[i] = &x[i][b], y8[i] = yq;
    __m256i sum = sums8(blk, y8);
    if constexpr (kOffset) sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(offset_term(y)));
    const __m256 dwdy = _mm256_mul_ps(block_scales8(blk), _mm256_set1_ps(y.d));
    return _mm256_add_ps(acc, term(sum, dwdy, mins8(blk), _mm256_set1_ps(dys(y))));
  }

  // Rows x[0..7] against activation rows act[0..NR) over all blocks (dot_rows).
  template <int NR>
  static void stream(int64_t n, const Block* const (&x)[kGroupRows], const Act* const (&act)[NR], __m256 (&acc)[NR]) {
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK0; ++b) {
      for (int r = 0; r < NR; ++r) acc[r] = add_block(x, b, act[r][b], acc[r]);
    }
  }

  // Row pointers of the group of weight rows [o, o + 8) of n_w: rows past n_w repeat row n_w − 1
  // (their lanes are computed and dropped).
  static void group_rows(const uint8_t* w, uint64_t row_bytes, int64_t o, int64_t n_w, const Block* (&x)[kGroupRows]) {
    for (int i = 0; i < kGroupRows; ++i) {
      x[i] = reinterpret_cast<const Block*>(w + std::min(o + i, n_w - 1) * row_bytes);
    }
  }

  static void store(__m256 v, float* out, int64_t count) {
    if (count == kGroupRows) return _mm256_storeu_ps(out, v);
    alignas(32) float lanes[kGroupRows];
    _mm256_store_ps(lanes, v);
    for (int64_t i = 0; i < count; ++i) out[i] = lanes[i];
  }

  // One weight row against NR activation rows: all 8 lanes take the row; lane 0 is kept.
  template <int NR>
  struct RowKernel {
    static void run(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, float* out,
                    int64_t out_stride) {
      const Block* x[kGroupRows];
      for (auto& p : x) p = static_cast<const Block*>(w);
      const Act* y[NR];
      for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const Act*>(act + r * act_stride);
      __m256 acc[NR];
      stream<NR>(n, x, y, acc);
      for (int r = 0; r < NR; ++r) out[r * out_stride] = _mm256_cvtss_f32(acc[r]);
    }
  };

  // Batch: per tile of activation rows (kept in L2), each group of 8 weight rows is transposed once
  // into a scratch row of Groups (L1) and then read by the tile's rows, kTileRows at a time.
  static void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const int64_t nb = n / kQK0;
    thread_local std::vector<Group> scratch;
    thread_local std::vector<int32_t> offsets;
    if (static_cast<int64_t>(scratch.size()) < nb) scratch.resize(nb);
    const int tile =
        static_cast<int>(std::clamp<uint64_t>(kActTileBytes / act_stride, kTileRows, 512) / kTileRows * kTileRows);
    if (kOffset && static_cast<int64_t>(offsets.size()) < tile * nb) offsets.resize(tile * nb);
    for (int r0 = 0; r0 < n_rows; r0 += tile) {
      const int tr = std::min(tile, n_rows - r0);
      const uint8_t* a = act + r0 * act_stride;
      if constexpr (kOffset) {
        for (int r = 0; r < tr; ++r) {
          const auto* y = reinterpret_cast<const Act*>(a + r * act_stride);
          for (int64_t b = 0; b < nb; ++b) offsets[r * nb + b] = offset_term(y[b]);
        }
      }
      for (int64_t o = 0; o < n_w; o += kGroupRows) {
        const Block* x[kGroupRows];
        group_rows(wb, row_bytes, o, n_w, x);
        // First pass over the chunk (its weights come from memory): the next group's rows (contiguous)
        // are fetched at the pace this one is read, since 8 short rows read side by side give the
        // hardware prefetcher no stream to follow (small batches waited on it; bench_kernels
        // BM_MatmulBatch). Later passes find them in L2.
        const char* next = reinterpret_cast<const char*>(wb + (o + kGroupRows) * row_bytes);
        constexpr int kStep = kGroupRows * static_cast<int>(sizeof(Block));
        for (int64_t b = 0; b < nb; ++b) {
          if (r0 == 0) {
            for (int j = 0; j < kStep; j += 64) _mm_prefetch(next + b * kStep + j, _MM_HINT_T0);
          }
          transpose(x, b, scratch[b]);
        }
        const int64_t count = std::min<int64_t>(kGroupRows, n_w - o);
        float* out_o = out + r0 * out_stride + o;
        const Group* g = scratch.data();
        const int32_t* off = offsets.data();
        for (int r = 0; r < tr; r += kTileRows) {
          tile_group<kTileRows, Groups>(std::min(kTileRows, tr - r), g, off, nb, a, act_stride, r, count, out_o,
                                        out_stride);
        }
      }
    }
  }

  // Activation rows [r, r + NR) of the tile against the group in scratch.
  template <int NR>
  static void tile_rows(const Group* g, const int32_t* off, int64_t nb, const uint8_t* a, uint64_t act_stride, int r,
                        int64_t count, float* out, int64_t out_stride) {
    const Act* y0[NR];
    for (int i = 0; i < NR; ++i) y0[i] = reinterpret_cast<const Act*>(a + (r + i) * act_stride);
    __m256 acc[NR];
    for (int i = 0; i < NR; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const Act* y[NR];
      int32_t offset[NR] = {};
      for (int i = 0; i < NR; ++i) {
        y[i] = y0[i] + b;
        if constexpr (kOffset) offset[i] = off[(r + i) * nb + b];
      }
      accumulate<NR>(g[b], y, offset, acc);
    }
    for (int i = 0; i < NR; ++i) store(acc[i], out + (r + i) * out_stride, count);
  }
};

}  // namespace
}  // namespace infer::kernels::avx2
