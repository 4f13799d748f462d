// Helpers shared by the AVX-512 kernels of the K-quant weights (*_avx512.cpp, and the tile kernels
// of *_amx.cpp through amx_common.h; compiled with AVX-512). Include only there.
//
// A group is 16 weight rows, one per 32-bit lane of a vector: the kernels read the rows' block words
// as 16-lane vectors (InterleavedRows: plain loads over the interleaved layout) and work vectorised
// over the group. The interleaved layout's decode and small-batch kernels (dot_outputs_interleaved,
// dot_rows_interleaved) dot those code vectors with one activation word broadcast (VPDPBUSD), form
// each super-block's exact integer sums and take the AVX2 kernels' float steps.
#pragma once
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* operands): a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "kernels/quant/blocks.h"
#include "kernels/matmul/decode_streams.h"
#include "kernels/x86/tile_group.h"

namespace infer::kernels::avx512 {
// Everything here has internal linkage, and the *_avx512.cpp and *_amx.cpp files use no
// standard-library templates: a template instantiated in a file compiled with AVX-512 is a weak symbol
// that the linker may pick for every file, and it would then run AVX-512 code on CPUs without it.
namespace {

inline int64_t min_of(int64_t a, int64_t b) { return a < b ? a : b; }

// A growable array of trivially copyable T on 64-byte aligned memory; contents are not kept on growth.
template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { std::free(data_); }
  void resize(size_t n) {
    if (n <= capacity_) return;
    std::free(data_);
    const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (!data_) throw std::bad_alloc();
    capacity_ = n;
  }
  T* data() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

inline constexpr int kGroupRows = 16;  // weight rows per group: one per 32-bit lane (and int32 column of a C tile)

// Per activation row and super-block: its scale dy, and its block sums reduced to groups of
// `group_len` codes and packed as int16 pairs (sums[2p], sums[2p+1]) in one int32, for vpdpwssd.
struct ActivationSums {
  int n_pairs = 0;
  int64_t n_blocks = 0;
  Buffer<float> dy;           // [row][block]
  Buffer<int32_t> sum_pairs;  // [row][block][pair]

  void build(const uint8_t* act, uint64_t act_stride, int n_rows, int64_t n, int group_len) {
    n_blocks = n / kQKK;
    const int n_groups = kQKK / group_len;
    n_pairs = n_groups / 2;
    dy.resize(static_cast<size_t>(n_rows * n_blocks));
    sum_pairs.resize(static_cast<size_t>(n_rows * n_blocks * n_pairs));  // every entry is written below
    for (int a = 0; a < n_rows; ++a) {
      const auto* y = reinterpret_cast<const BlockQ8_K*>(act + a * act_stride);
      for (int64_t i = 0; i < n_blocks; ++i) {
        dy[a * n_blocks + i] = y[i].d;
        int16_t sums[kQKK / 16] = {};
        for (int g = 0; g < n_groups; ++g) {
          int sum = 0;
          for (int h = 0; h < group_len / 16; ++h) sum += y[i].bsums[g * (group_len / 16) + h];
          sums[g] = static_cast<int16_t>(sum);  // |sum| ≤ 32·128: fits
        }
        for (int p = 0; p < n_pairs; ++p) {
          const uint32_t lo = static_cast<uint16_t>(sums[2 * p]), hi = static_cast<uint16_t>(sums[2 * p + 1]);
          sum_pairs[(a * n_blocks + i) * n_pairs + p] = static_cast<int32_t>(lo | hi << 16);
        }
      }
    }
  }
  float scale(int a, int64_t i) const { return dy[a * n_blocks + i]; }
  int32_t pair(int a, int64_t i, int p) const { return sum_pairs[(a * n_blocks + i) * n_pairs + p]; }
};

// acc + sc·sum per lane, exact for |sum| < 2^23, with sc given as scale_words(sc) (|sc| ≤ 128). The
// sum is split into its low byte and the 16 bits above it as int16 words (a byte shuffle), and
// VPDPWSSD adds low·sc + high·256·sc: two µops where VPMULLD takes two and the add one more
// (BM_MatmulBatch, BM_MatmulBatchHot; docs/performance.md, Constants).
inline __m512i scale_words(__m512i sc) {  // words (sc, 256·sc)
  return _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(sc, 24));
}
inline __m512i add_scaled(__m512i acc, __m512i sum, __m512i sc_words) {
  // Each dword's bytes (0, zero, 1, 2): VPSHUFB indexes bytes of the 128-bit lane.
  const __m512i split = _mm512_broadcast_i32x4(_mm_setr_epi8(0, -128, 1, 2, 4, -128, 5, 6, 8, -128, 9, 10, 12, -128, 13, 14));
  return _mm512_dpwssd_epi32(acc, _mm512_shuffle_epi8(sum, split), sc_words);
}

// Vectors kept in a Buffer (wrapped: the vector types' attributes do not survive as template arguments).
struct alignas(64) Zmm {
  __m512i v;
};
struct alignas(64) ZmmF {
  __m512 v;
};

// Interleaved layout (interleave.h): plain loads from the group's unit of each super-block, one
// stream. Each load prefetches its line kAhead bytes further on: spread over the loads, the
// prefetches keep a steady number of reads in flight, where a burst of them per unit would stall on
// the line fill buffers.
struct InterleavedRows {
  // Without these prefetches decode is much slower; any reach from 2 KiB to a group ahead does as well
  // (BM_MatmulBatch; docs/performance.md, Constants).
  static constexpr int64_t kAhead = 4096;
  const uint8_t* w;
  int64_t block_bytes;
  InterleavedRows(const uint8_t* group, uint64_t /*row_bytes*/, int /*rows: 16*/, int64_t block_bytes_)
      : w(group), block_bytes(block_bytes_) {}
  const uint8_t* unit(int64_t i) const { return w + i * 16 * block_bytes; }
  __m512i word(int64_t i, int64_t at) const {
    const uint8_t* p = unit(i) + 16 * at;
    _mm_prefetch(reinterpret_cast<const char*>(p + kAhead), _MM_HINT_T0);
    return _mm512_loadu_si512(p);
  }
  __m512i word_again(int64_t i, int64_t at) const {  // a word read before: its line is prefetched already
    return _mm512_loadu_si512(unit(i) + 16 * at);
  }
  __m512i last_half(int64_t i) const {  // the 16 rows' tails of 2 bytes follow the words
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(unit(i) + 16 * (block_bytes - 2))));
  }
  void prefetch(int64_t) const {}  // word() prefetches
  // All of unit i into L2 (Q6_K batches) or, BlockBytes a constant so that the prefetches are
  // unrolled, into L1 (Q6_K decode): Q6_K's reads jump between three parts of its unit (ql, ql + 32,
  // qh), which the hardware prefetchers follow badly. Measurements in q6_k_avx512.cpp.
  void prefetch_unit_to_l2(int64_t i) const {
    const auto* p = reinterpret_cast<const char*>(unit(i));
    for (int64_t l = 0; l < 16 * block_bytes; l += 64) _mm_prefetch(p + l, _MM_HINT_T1);
  }
  template <int64_t BlockBytes>
  void prefetch_unit_to_l1(int64_t i) const {
    const auto* p = reinterpret_cast<const char*>(unit(i));
    for (int64_t l = 0; l < 16 * BlockBytes; l += 64) _mm_prefetch(p + l, _MM_HINT_T0);
  }
};

// Batch driver of the float tiles: weight rows in sub-tiles of `sub` rows, which stay in L2 while every
// group of up to TileRows activation rows passes over them; Tile::tile_rows<NR>(n, w, row_bytes, n_w,
// act, act_stride, out, out_stride, first) does one group (first: the sub-tile's first group, whose
// weight rows come from memory).
template <int TileRows, class Tile>
void dot_sub_tiles(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t n_w, int64_t sub, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  for (int64_t w0 = 0; w0 < n_w; w0 += sub) {
    const int64_t nw = min_of(sub, n_w - w0);
    for (int r = 0; r < n_rows; r += TileRows) {
      const int rows = n_rows - r < TileRows ? n_rows - r : TileRows;
      tile_group<TileRows, Tile>(rows, n, w + w0 * row_bytes, row_bytes, nw, act + r * act_stride, act_stride,
                                 out + r * out_stride + w0, out_stride, r == 0);
    }
  }
}

// Σ of 32 signed bytes, exact (psadbw of the codes biased to unsigned, less the bias): a Q8_0
// activation block's offset term.
inline int32_t sum_i8(const int8_t* p) {
  const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i v = _mm256_sad_epu8(_mm256_xor_si256(codes, _mm256_set1_epi8(static_cast<char>(0x80))),
                                    _mm256_setzero_si256());
  __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(s) - 32 * 128;
}

// The terms −offset·Σy of activation rows' blocks (Q8_0F/Q8_1F: the bias of unsigned weight codes,
// taken back out of a VPDPBUSD sum), where the sums start. Block-major in groups of kRows rows: a
// pass over one group's rows broadcasts each straight from memory through one pointer, where
// row-major terms cost a scalar load, a negation and a move per row and block (bench_kernels
// BM_MatmulPrefill, Q8_0/Q4_0/Q5_0/Q5_1).
struct BlockOffsets {
  static constexpr int kRows = 8;
  Buffer<int32_t> v;
  int64_t n_blocks = 0;

  template <class Act>
  void build(int32_t offset, const uint8_t* act, uint64_t act_stride, int64_t n_rows, int64_t blocks) {
    n_blocks = blocks;
    v.resize(static_cast<size_t>((n_rows + kRows - 1) / kRows * kRows * blocks));
    for (int64_t r = 0; r < n_rows; ++r) {
      const auto* y = reinterpret_cast<const Act*>(act + r * act_stride);
      int32_t* row = v.data() + r / kRows * kRows * blocks + r % kRows;
      for (int64_t b = 0; b < blocks; ++b) row[b * kRows] = -offset * sum_i8(y[b].qs);
    }
  }
  // The group from row r0 (a multiple of kRows): the term of row r0 + r, block b at [b * kRows + r].
  const int32_t* group(int64_t r0) const { return v.data() + r0 * n_blocks; }
  int32_t at(int64_t r, int64_t b) const { return group(r / kRows * kRows)[b * kRows + r % kRows]; }
};

// The 4 activation codes at p in every lane (the signed operand of VPDPBUSD).
inline __m512i broadcast_word(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The f16 in the low (high) half of each dword, as 16 floats.
inline __m512 low_halves_f32(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }
inline __m512 high_halves_f32(__m512i v) { return low_halves_f32(_mm512_srli_epi32(v, 16)); }

// Σ_p weight_pairs[p] · (activation row's sum pair p), int16 pairs multiplied and added into int32.
// Pairs: Zmm (buffers) or __m512i (registers).
inline __m512i vector_of(const Zmm& z) { return z.v; }
inline __m512i vector_of(__m512i v) { return v; }

template <class Pair>
__m512i pair_dot(const Pair* weight_pairs, const ActivationSums& sums, int row, int64_t i, int n_pairs) {
  __m512i s = _mm512_setzero_si512();
  for (int p = 0; p < n_pairs; ++p) {
    s = _mm512_dpwssd_epi32(s, vector_of(weight_pairs[p]), _mm512_set1_epi32(sums.pair(row, i, p)));
  }
  return s;
}

// Decode's walk over a chunk of interleaved groups (n_w a multiple of 16): one stream, or two side by
// side (one per half of the chunk), as decode_streams.h chooses. add_block(source, i, acc) adds block
// i's terms of one group to acc (its 16 rows); each group's 16 sums go to out in row order.
template <class AddBlock>
void decode_groups(const uint8_t* w, uint64_t row_bytes, int64_t n_w, int64_t block_bytes, int64_t n_blocks,
                   float* out, AddBlock add_block) {
  auto source = [&](int64_t g) {
    return InterleavedRows(w + g * kGroupRows * row_bytes, row_bytes, kGroupRows, block_bytes);
  };
  const DecodeStreamsCall call = decode_streams_begin();
  const int64_t n_groups = n_w / kGroupRows, part = call.streams == 2 ? n_groups / 2 : 0;
  for (int64_t g = 0; g < part; ++g) {
    const InterleavedRows src[2] = {source(g), source(g + part)};
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < n_blocks; ++i) {
      for (int s = 0; s < 2; ++s) add_block(src[s], i, acc[s]);
    }
    for (int s = 0; s < 2; ++s) _mm512_storeu_ps(out + (g + s * part) * kGroupRows, acc[s]);
  }
  for (int64_t g = 2 * part; g < n_groups; ++g) {
    const InterleavedRows src = source(g);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_blocks; ++i) add_block(src, i, acc);
    _mm512_storeu_ps(out + g * kGroupRows, acc);
  }
  decode_streams_end(call, static_cast<uint64_t>(n_w) * row_bytes);
}

// Activation rows per pass of the interleaved layout's small-batch kernels (dot_rows_interleaved).
inline constexpr int kRowsPerPass = 8;

// The Q8_K activation rows' codes regrouped for those passes: super-block i of rows r0..r0+7 (r0 a
// multiple of kRowsPerPass) as runs of kQKK codes side by side, so that a pass reaches every row's
// codes from one pointer (a pointer per row left its kernels short of general registers, reloading
// them from the stack: bench_kernels BM_MatmulBatchHot, Q4_K and Q6_K at 8 rows).
struct PassCodes {
  Buffer<int8_t> qs;
  int64_t n_blocks = 0;

  void build(const uint8_t* act, uint64_t act_stride, int n_rows, int64_t n) {
    n_blocks = n / kQKK;
    qs.resize(static_cast<size_t>((n_rows + kRowsPerPass - 1) / kRowsPerPass * kRowsPerPass * n_blocks * kQKK));
    for (int a = 0; a < n_rows; ++a) {
      const auto* y = reinterpret_cast<const BlockQ8_K*>(act + a * act_stride);
      for (int64_t i = 0; i < n_blocks; ++i) __builtin_memcpy(row(a, i), y[i].qs, kQKK);
    }
  }
  // Super-block i of the pass from row0: row row0 + a's codes at a · kQKK.
  const int8_t* pass(int row0, int64_t i) const { return qs.data() + pass_offset(row0, i); }

 private:
  int64_t pass_offset(int row0, int64_t i) const { return ((row0 / kRowsPerPass) * n_blocks + i) * kRowsPerPass * kQKK; }
  int8_t* row(int a, int64_t i) { return qs.data() + pass_offset(a, i) + (a % kRowsPerPass) * kQKK; }
};

// The decode kernel over the interleaved layout (contract as DotOutputsFn, n_w a multiple of 16) for a
// format's Decode: kSumGroupLen, kBlockBytes and block<NR, NG>(src, i, x, sums, row0, acc): acc[g·NR + a]
// plus super-block i's terms for the 16 rows of group src[g] and activation row row0 + a, whose codes
// are at x + a · kQKK (PassCodes). One float per row and super-block, in super-block order.
template <class Decode>
void dot_outputs_interleaved(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                             float* out) {
  thread_local ActivationSums sums;
  thread_local PassCodes codes;
  sums.build(act, 0, 1, n, Decode::kSumGroupLen);
  codes.build(act, 0, 1, n);
  decode_groups(static_cast<const uint8_t*>(w), row_bytes, n_w, Decode::kBlockBytes, sums.n_blocks, out,
                [&](const InterleavedRows& src, int64_t i, __m512& acc) {
                  Decode::template block<1, 1>(&src, i, codes.pass(0, i), sums, 0, &acc);
                });
}

// Small batches over the interleaved layout (contract as DotTileFn, n_w a multiple of 16): up to
// kRowsPerPass activation rows at once against one group with the Decode's block<NR, 1>, so that the
// codes of a super-block are unpacked once per pass and the AMX tiles' loads and stores are avoided.
// A Decode with kPairGroups takes two groups a pass (block<NR, 2>) when the batch fills a pass, to
// broadcast each activation word once for both groups' code vectors.
template <class Decode, int NR, int NG>
void rows_pass(const InterleavedRows* src, const ActivationSums& sums, const PassCodes& codes, int row0, float* out,
               int64_t group_step, int64_t out_stride) {
  __m512 acc[NG * NR];
  for (__m512& x : acc) x = _mm512_setzero_ps();
  for (int64_t i = 0; i < sums.n_blocks; ++i) {
    Decode::template block<NR, NG>(src, i, codes.pass(row0, i), sums, row0, acc);
  }
  for (int g = 0; g < NG; ++g) {
    for (int a = 0; a < NR; ++a) _mm512_storeu_ps(out + g * group_step + (row0 + a) * out_stride, acc[g * NR + a]);
  }
}

// The passes over groups src[0..NG), whose outputs start group_step apart from out.
template <class Decode, int NG>
void rows_passes(const InterleavedRows* src, const ActivationSums& sums, const PassCodes& codes, int n_rows,
                 float* out, int64_t group_step, int64_t out_stride) {
  for (int a0 = 0; a0 < n_rows; a0 += kRowsPerPass) {
    switch (static_cast<int>(min_of(kRowsPerPass, n_rows - a0))) {
      case 1: rows_pass<Decode, 1, NG>(src, sums, codes, a0, out, group_step, out_stride); break;
      case 2: rows_pass<Decode, 2, NG>(src, sums, codes, a0, out, group_step, out_stride); break;
      case 3: rows_pass<Decode, 3, NG>(src, sums, codes, a0, out, group_step, out_stride); break;
      case 4: rows_pass<Decode, 4, NG>(src, sums, codes, a0, out, group_step, out_stride); break;
      case 5: rows_pass<Decode, 5, NG>(src, sums, codes, a0, out, group_step, out_stride); break;
      case 6: rows_pass<Decode, 6, NG>(src, sums, codes, a0, out, group_step, out_stride); break;
      case 7: rows_pass<Decode, 7, NG>(src, sums, codes, a0, out, group_step, out_stride); break;
      default: rows_pass<Decode, 8, NG>(src, sums, codes, a0, out, group_step, out_stride); break;
    }
  }
}

template <class Decode>
void dot_rows_interleaved(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                          uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  thread_local ActivationSums sums;
  thread_local PassCodes codes;
  sums.build(act, act_stride, n_rows, n, Decode::kSumGroupLen);
  codes.build(act, act_stride, n_rows, n);
  const auto* wb = static_cast<const uint8_t*>(w);
  auto group = [&](int64_t g) {
    return InterleavedRows(wb + g * kGroupRows * row_bytes, row_bytes, kGroupRows, Decode::kBlockBytes);
  };
  const int64_t n_groups = n_w / kGroupRows;
  int64_t g = 0;
  if constexpr (Decode::kPairGroups) {
    // The pairs are groups g and g + half: two sequential streams, each read ahead by its words'
    // prefetches, where neighbouring groups side by side left the second group's first units to miss
    // (bench_kernels BM_MatmulBatch, 8 rows).
    const int64_t half = n_rows >= kRowsPerPass ? n_groups / 2 : 0;
    for (; g < half; ++g) {
      const InterleavedRows src[2] = {group(g), group(g + half)};
      rows_passes<Decode, 2>(src, sums, codes, n_rows, out + g * kGroupRows, half * kGroupRows, out_stride);
    }
    g *= 2;
  }
  for (; g < n_groups; ++g) {
    const InterleavedRows src[1] = {group(g)};
    rows_passes<Decode, 1>(src, sums, codes, n_rows, out + g * kGroupRows, 0, out_stride);
  }
}

}  // namespace
}  // namespace infer::kernels::avx512
