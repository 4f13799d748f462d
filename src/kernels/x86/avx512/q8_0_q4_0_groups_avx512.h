// The groups of 16 Q8_0, Q4_0, Q5_0 or Q5_1 weight rows that the AVX-512 batch kernels read (the VNNI
// tile, q8_0_q4_0_q5_0_q5_1_avx512.cpp, and for Q8_0/Q4_0 the AMX-INT8 tiles, q8_0_q4_0_amx.cpp): each block's
// codes transposed once per tile of activation rows into 8 vectors (vector k holds codes 4k..4k+3 of
// the 16 rows, which is also an AMX B tile), from the row layout or (Q8_0, Q4_0) realigned from the
// interleaved layout's units (2 bytes off the codes). The weights are taken unsigned, u = w + 128
// (Q8_0, an XOR with 0x80), the nibble u = code + 8 (Q4_0) or the 5-bit code u = w + 16 (Q5_0; Q5_1's
// codes are unsigned), and each block's sum starts from −kOffset·Σy: the block's exact integer sum S.
// The float step per block is the scalar reference's, acc = acc + float(S)·(dw·dy) (Q5_1: plus
// m·(dy·Σy)) in block order, so every output is bitwise what the references and the AVX2 kernels
// give (invariant 7). Include only in *_avx512.cpp / *_amx.cpp files: internal linkage, as
// avx512_common.h explains.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/x86/avx512/avx512_common.h"
#include "kernels/x86/block_codes.h"
#include "kernels/quant/blocks.h"
#include "kernels/x86/word_transpose.h"

namespace infer::kernels::avx512 {
namespace {

// Activation rows per tile, about this many bytes of their slice: they stay in L2 while every group of
// the chunk passes (the AVX2 tile's figure).
constexpr uint64_t kActTileBytes = 160 * 1024;
// Blocks per slice of a row: a group's transposed slice (32 × 576 bytes) stays in L1 while the tile's
// rows pass, and long rows (8192 wide: 16 rows a tile unsliced) still fill a tile of rows
// (bench_kernels BM_MatmulPrefill, 8192 × 2048).
constexpr int64_t kSliceBlocks = 32;

// One block of a group of 16 weight rows: codes[k] holds unsigned codes 4k..4k+3 of rows 0..15, dw
// the rows' scales; GroupBlockMin adds their minimums (Q5_1).
struct alignas(64) GroupBlock {
  __m512i codes[8];
  __m512 dw;
};
struct alignas(64) GroupBlockMin : GroupBlock {
  __m512 m;
};

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// An interleaved unit's bytes 4k + 2 .. 4k + 5 of each row (the block's bytes past its 2-byte scale):
// the top half of word k and the bottom half of word k + 1.
inline __m512i realign(__m512i word, __m512i next) {
  return _mm512_or_si512(_mm512_srli_epi32(word, 16), _mm512_slli_epi32(next, 16));
}

// What a batch pass (Pass::tile_rows) works on: `rows` activation rows from act (block 0 of the first)
// against blocks b0 .. b0 + nb of a group of `count` weight rows, transposed in g[0..nb); out (rows
// out_stride apart) holds the sums of blocks 0 .. b0, which the pass continues in block order.
template <class Group>
struct TileSlice {
  const Group* g;
  int64_t b0, nb;
  const uint8_t* act;
  uint64_t act_stride;
  const BlockOffsets* offsets;
  int64_t rows, count;
  float* out;
  int64_t out_stride;
};

// A Codes view gives: Block; Act, its activation block; kOffset, the bias of the unsigned codes; kMin:
// the block has a minimum (Q5_1, with BlockQ8_1F activations that carry Σy); row(block), the 32
// unsigned codes; for the interleaved layout from_words and kWords.
// Q8_0: the signed codes biased to unsigned, w + 128.
struct CodesQ8_0 {
  using Block = BlockQ8_0;
  using Act = BlockQ8_0F;
  static constexpr bool kMin = false;
  static constexpr int32_t kOffset = 128;
  static __m256i row(const Block& b) {
    return _mm256_xor_si256(load256(b.qs), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
  // codes[k] from the 16 rows' words 0..7 and the 2-byte tails of an interleaved unit.
  static void from_words(const __m512i (&w)[9], __m512i (&codes)[8]) {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int k = 0; k < 8; ++k) codes[k] = _mm512_xor_si512(realign(w[k], w[k + 1]), bias);
  }
  static constexpr int kWords = 8;
};

// Q4_0: the nibbles u = code + 8 in element order (low nibbles: elements 0-15, high: 16-31).
struct CodesQ4_0 {
  using Block = BlockQ4_0;
  using Act = BlockQ8_0F;
  static constexpr bool kMin = false;
  static constexpr int32_t kOffset = 8;
  static __m256i row(const Block& b) { return nibbles(b.qs); }
  static void from_words(const __m512i (&w)[9], __m512i (&codes)[8]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int k = 0; k < 4; ++k) {
      const __m512i q = realign(w[k], w[k + 1]);  // qs[4k..4k+3]: low nibbles codes 4k.., high 16 + 4k..
      codes[k] = _mm512_and_si512(q, m4);
      codes[k + 4] = _mm512_and_si512(_mm512_srli_epi32(q, 4), m4);
    }
  }
  static constexpr int kWords = 4;
};

// Q5_0 and Q5_1: the codes u = nibble | fifth bit·16 (block_codes.h); Q5_0's w = u − 16, Q5_1's
// w = u·d + m.
template <class B, class A, int32_t kBias>
struct CodesQ5 {
  using Block = B;
  using Act = A;
  static constexpr bool kMin = kBias == 0;
  static constexpr int32_t kOffset = kBias;
  static __m256i row(const Block& b) { return q5_codes(b); }
};
using CodesQ5_0 = CodesQ5<BlockQ5_0, BlockQ8_0F, 16>;
using CodesQ5_1 = CodesQ5<BlockQ5_1, BlockQ8_1F, 0>;

template <class Codes>
struct Groups {
  using Block = typename Codes::Block;
  using Act = typename Codes::Act;
  using Group = std::conditional_t<Codes::kMin, GroupBlockMin, GroupBlock>;

  // The f16 field of block b of rows x[0..15] as floats.
  static __m512 halves16(const Block* const (&x)[kGroupRows], int64_t b, uint16_t Block::*field) {
    const auto four = [&](int i) {
      return static_cast<long long>(uint64_t{x[i][b].*field} | uint64_t{x[i + 1][b].*field} << 16 |
                                    uint64_t{x[i + 2][b].*field} << 32 | uint64_t{x[i + 3][b].*field} << 48);
    };
    return _mm512_cvtph_ps(_mm256_set_epi64x(four(12), four(8), four(4), four(0)));
  }

  // Block b of rows x[0..15] into g.
  static void transpose(const Block* const (&x)[kGroupRows], int64_t b, Group& g) {
    __m256i r[8], lo[8], hi[8];
    for (int i = 0; i < 8; ++i) r[i] = Codes::row(x[i][b]);
    transpose_words8(r, lo);
    for (int i = 0; i < 8; ++i) r[i] = Codes::row(x[i + 8][b]);
    transpose_words8(r, hi);
    for (int k = 0; k < 8; ++k) g.codes[k] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[k]), hi[k], 1);
    g.dw = halves16(x, b, &Block::d);
    if constexpr (Codes::kMin) g.m = halves16(x, b, &Block::m);
  }

  // Block b of an interleaved group (its unit b) into g.
  static void from_interleaved(const uint8_t* group, int64_t b, GroupBlock& g) {
    const uint8_t* unit = group + b * kGroupRows * static_cast<int64_t>(sizeof(Block));
    __m512i w[9];
    for (int k = 0; k < Codes::kWords; ++k) w[k] = _mm512_loadu_si512(unit + 64 * k);
    w[Codes::kWords] = _mm512_cvtepu16_epi32(load256(unit + 64 * Codes::kWords));  // the tails
    Codes::from_words(w, g.codes);
    g.dw = low_halves_f32(w[0]);
  }

  // Blocks b0 .. b0 + nb of the group of row-layout weight rows from o into g[0..nb). First pass over
  // the chunk (`first`): the same blocks of the next group's rows are fetched at the pace these are
  // read, as in the AVX2 tile (16 short rows side by side give the hardware prefetcher no stream).
  static void fill_from_rows(const uint8_t* wb, uint64_t row_bytes, int64_t n_w, int64_t o, int64_t b0, int64_t nb,
                             bool first, Group* g) {
    const Block* x[kGroupRows];  // rows past n_w repeat row n_w − 1 (their lanes are dropped)
    for (int i = 0; i < kGroupRows; ++i) {
      x[i] = reinterpret_cast<const Block*>(wb + min_of(o + i, n_w - 1) * row_bytes);
    }
    const bool fetch_next = first && o + kGroupRows < n_w;
    const uint8_t* next = wb + (o + kGroupRows) * row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      if (fetch_next) {
        const auto* block = reinterpret_cast<const char*>(next + (b0 + b) * sizeof(Block));
        for (int i = 0; i < kGroupRows; ++i) _mm_prefetch(block + i * row_bytes, _MM_HINT_T0);
      }
      transpose(x, b0 + b, g[b]);
    }
  }

  // Per tile of activation rows (kept in L2) and slice of kSliceBlocks blocks of them, each group of 16
  // weight rows is transposed (Interleaved: realigned from its units, one sequential stream for the
  // hardware prefetcher) once into a scratch row of GroupBlocks and then read by the tile's rows:
  // Pass::tile_rows(slice) takes them all (in steps of Pass::kRowsUnit rows), each slice after the
  // first continuing the sums in out; Pass::done() ends the call.
  template <bool Interleaved, class Pass>
  static void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
    const auto* wb = static_cast<const uint8_t*>(w);
    const int64_t nb = n / kQK0, slice_blocks = min_of(nb, kSliceBlocks);
    thread_local Buffer<Group> scratch;
    thread_local BlockOffsets offsets;
    scratch.resize(static_cast<size_t>(slice_blocks));
    const auto slice_bytes = static_cast<int64_t>(slice_blocks * sizeof(Act));
    int64_t tile = static_cast<int64_t>(kActTileBytes) / slice_bytes / Pass::kRowsUnit * Pass::kRowsUnit;
    tile = tile < Pass::kRowsUnit ? Pass::kRowsUnit : (tile > 512 ? 512 : tile);
    for (int64_t r0 = 0; r0 < n_rows; r0 += tile) {
      const uint8_t* a = act + r0 * act_stride;
      TileSlice<Group> t{scratch.data(), 0, 0, a, act_stride, &offsets, min_of(tile, n_rows - r0), 0, nullptr,
                         out_stride};
      offsets.build<Act>(Codes::kOffset, a, act_stride, t.rows, nb);
      for (t.b0 = 0; t.b0 < nb; t.b0 += slice_blocks) {
        t.nb = min_of(slice_blocks, nb - t.b0);
        for (int64_t o = 0; o < n_w; o += kGroupRows) {
          if constexpr (Interleaved) {
            for (int64_t b = 0; b < t.nb; ++b) from_interleaved(wb + o * row_bytes, t.b0 + b, scratch[b]);
          } else {
            fill_from_rows(wb, row_bytes, n_w, o, t.b0, t.nb, r0 == 0, scratch.data());
          }
          t.count = min_of(kGroupRows, n_w - o);
          t.out = out + r0 * out_stride + o;
          Pass::tile_rows(t);
        }
      }
    }
    Pass::done();
  }
};

}  // namespace
}  // namespace infer::kernels::avx512
