// Helpers shared by the *_amx.cpp tile kernels (compiled with AVX-512 and AMX), on top of
// avx512_common.h. Include only there.
//
// The tile kernels compute C[a][w] = Σ_k Y[a][k]·W[w][k] for up to 16 activation rows a and 16 weight
// rows w over one sub-block of K codes. A holds the activation codes, read in place from the Q8_K
// blocks (row stride = the activation row stride). B holds the weight codes in the VNNI layout that
// TDPBSUD wants: K/4 rows, where row r holds, for each weight row w, its codes 4r..4r+3. The kernels
// build B once per group of 16 weight rows, for all the activation rows, from 16-lane vectors of the
// rows' block words: AVX-512 gathers over the row layout, plain loads over the interleaved layout
// (GatheredRows, InterleavedRows). C holds the exact int32 sums (a rows × 16 w), which AVX-512 then
// scales, vectorised over the 16 weight rows. For small batches over the interleaved layout,
// dot_rows_planes folds the scales into the B tiles.
#pragma once
#include <cstring>

#include "kernels/x86/avx512/avx512_common.h"

namespace infer::kernels::amx {
// Internal linkage, as avx512_common.h explains.
namespace {
using namespace avx512;

inline constexpr int kTileActRows = 16;  // activation rows per A tile
inline constexpr int kRowBytes = 64;     // B and C tile row stride in the staging buffers

// Loads a 64-byte LDTILECFG record: byte 0 palette (1), bytes 16 + 2t the row bytes of tile t, byte
// 48 + t its rows. Our own asm: GCC 12's _tile_loadconfig tells the compiler it reads only 8 bytes, so
// the stores of the rest were dropped as dead.
inline void load_tile_config(const uint8_t (&cfg)[64]) {
  struct Record {
    uint8_t bytes[64];
  };
  __asm__ volatile("ldtilecfg %0" : : "m"(*reinterpret_cast<const Record*>(cfg)));
}

// The tile configuration record of the integer kernels: tmm0..3 C accumulators (n_act × 64 bytes);
// tmm4, tmm6 A (n_act × k_sub bytes); tmm5, tmm7 B (k_sub/4 × 64 bytes). Two A/B pairs let one
// sub-block load while the previous multiplies.
inline void int_tile_config(int k_sub, int n_act, uint8_t (&cfg)[64]) {
  for (auto& byte : cfg) byte = 0;
  cfg[0] = 1;
  auto set = [&](int t, int rows, int colsb) {
    cfg[16 + 2 * t] = static_cast<uint8_t>(colsb & 0xFF);
    cfg[17 + 2 * t] = static_cast<uint8_t>(colsb >> 8);
    cfg[48 + t] = static_cast<uint8_t>(rows);
  };
  for (int t = 0; t < 4; ++t) set(t, n_act, kRowBytes);
  for (int t = 4; t <= 6; t += 2) set(t, n_act, k_sub);          // A tiles
  for (int t = 5; t <= 7; t += 2) set(t, k_sub / 4, kRowBytes);  // B tiles
}

inline void configure_tiles(int k_sub, int n_act) {
  alignas(64) uint8_t cfg[64];
  int_tile_config(k_sub, n_act, cfg);
  load_tile_config(cfg);
}

// Tile instructions by tile number for kernels written over a tiles policy (hardware or software
// model): GCC's intrinsics paste their tile numbers into the asm text, so each tile gets its own
// function.
template <int t>
void hw_zero();
template <int t>
void hw_load(const void* p, long stride);
template <int t>
void hw_store(void* p, long stride);
#define INFER_TILE(t)                                                                \
  template <>                                                                        \
  inline void hw_zero<t>() { _tile_zero(t); }                                        \
  template <>                                                                        \
  inline void hw_load<t>(const void* p, long stride) { _tile_loadd(t, p, stride); }  \
  template <>                                                                        \
  inline void hw_store<t>(void* p, long stride) { _tile_stored(t, p, stride); }
INFER_TILE(0)
INFER_TILE(1)
INFER_TILE(2)
INFER_TILE(3)
INFER_TILE(4)
INFER_TILE(5)
INFER_TILE(6)
INFER_TILE(7)
#undef INFER_TILE

// The tile registers of the hardware, as a tiles policy's base (a kernel's policy adds configure(m)
// and its dp<c, a, b>()).
struct HardwareTileRegisters {
  template <int t>
  static void zero() { hw_zero<t>(); }
  template <int t>
  static void load(const void* p, long stride) { hw_load<t>(p, stride); }
  template <int t>
  static void store(void* p, long stride) { hw_store<t>(p, stride); }
  static void release() { _tile_release(); }
};

// The tile registers in software, for models of the tile instructions that test a kernel's layout
// logic on CPUs without AMX: each tile holds the configured rows × colsb bytes, the rest reads 0.
struct ModelTileRegisters {
  struct Tile {
    alignas(64) uint8_t bytes[16][kRowBytes];
    int rows = 0;
    int colsb = 0;
  };
  static Tile* tiles() {
    static thread_local Tile t[8];
    return t;
  }
  static void configure(const uint8_t (&cfg)[64]) {
    for (int t = 0; t < 8; ++t) {
      tiles()[t].rows = cfg[48 + t];
      tiles()[t].colsb = cfg[16 + 2 * t] | cfg[17 + 2 * t] << 8;
    }
  }
  template <int t>
  static void zero() {
    std::memset(tiles()[t].bytes, 0, sizeof(Tile::bytes));
  }
  template <int t>
  static void load(const void* p, long stride) {
    Tile& d = tiles()[t];
    std::memset(d.bytes, 0, sizeof(Tile::bytes));
    const auto* src = static_cast<const uint8_t*>(p);
    for (int r = 0; r < d.rows; ++r) std::memcpy(d.bytes[r], src + r * stride, static_cast<size_t>(d.colsb));
  }
  template <int t>
  static void store(void* p, long stride) {
    const Tile& s = tiles()[t];
    for (int r = 0; r < s.rows; ++r) {
      std::memcpy(static_cast<uint8_t*>(p) + r * stride, s.bytes[r], static_cast<size_t>(s.colsb));
    }
  }
  static void release() {}
};

inline constexpr int kPrefetchGroups = 1;

// Where a group's (up to) 16 weight rows are read from. Both sources give word(i, at): the 4-byte word
// at byte `at` of super-block i's block of each row, as one vector (lane r: row r), and last_half(i):
// the block's last 2 bytes of each row in the low half of lane r (Q6_K's d).
//
// Row layout: AVX-512 gathers over rows row_bytes apart; the last group of a matrix may be short.
struct GatheredRows {
  const uint8_t* w;
  uint64_t row_bytes;
  int64_t block_bytes;
  __m512i offsets;
  __mmask16 mask;
  GatheredRows(const uint8_t* group, uint64_t row_bytes_, int rows, int64_t block_bytes_)
      : w(group), row_bytes(row_bytes_), block_bytes(block_bytes_),
        offsets(_mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                   _mm512_set1_epi32(static_cast<int32_t>(row_bytes_)))),
        mask(static_cast<__mmask16>((1u << rows) - 1)) {}
  __m512i word(int64_t i, int64_t at) const {  // 0 for rows past the matrix
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, offsets, w + i * block_bytes + at, 1);
  }
  // Read as the word ending there: the block's last word may not be 4-byte aligned, and must not
  // read past the matrix.
  __m512i last_half(int64_t i) const { return _mm512_srli_epi32(word(i, block_bytes - 4), 16); }
  // Prefetches block i of each of the 16 rows kPrefetchGroups groups further on. A batch step reads
  // every weight once, from memory: without this the gathers wait on it longer, and one or two groups
  // ahead beat four (BM_MatmulBatch; docs/performance.md, Constants).
  void prefetch(int64_t i) const {
    const uint8_t* p = w + kPrefetchGroups * 16 * row_bytes + i * block_bytes;
    for (int r = 0; r < 16; ++r) {
      for (int64_t l = 0; l < block_bytes + 63; l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(p + r * row_bytes + l), _MM_HINT_T0);
      }
    }
  }
};

// B tiles of a group in one 64-byte aligned buffer: [block][sub-block], `tile_bytes` each.
class BTiles {
 public:
  void resize(int64_t n_tiles, int tile_bytes) {
    tile_bytes_ = tile_bytes;
    bytes_.resize(static_cast<size_t>(n_tiles * tile_bytes));
  }
  uint8_t* tile(int64_t index) const { return bytes_.data() + index * tile_bytes_; }

 private:
  Buffer<uint8_t> bytes_;
  int tile_bytes_ = 0;
};

using CTiles = int32_t[kTileActRows][kGroupRows];  // one sub-block's sums: [activation row][weight row]

// Sub-blocks j0..j0+3 of super-block i into tmm0..3, stored to c[j0..j0+3]. `a_codes`: the first
// activation row's codes of the super-block; rows are act_stride apart.
template <class Group>
void multiply_four(const Group& g, const uint8_t* a_codes, uint64_t act_stride, int64_t i, int j0, CTiles* c) {
  constexpr int kLen = Group::kSubLen;
  const auto stride = static_cast<long>(act_stride);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a_codes + kLen * j0, stride);
  _tile_loadd(5, g.b_tile(i, j0), kRowBytes);
  _tile_dpbsud(0, 4, 5);
  _tile_loadd(6, a_codes + kLen * (j0 + 1), stride);
  _tile_loadd(7, g.b_tile(i, j0 + 1), kRowBytes);
  _tile_dpbsud(1, 6, 7);
  _tile_loadd(4, a_codes + kLen * (j0 + 2), stride);
  _tile_loadd(5, g.b_tile(i, j0 + 2), kRowBytes);
  _tile_dpbsud(2, 4, 5);
  _tile_loadd(6, a_codes + kLen * (j0 + 3), stride);
  _tile_loadd(7, g.b_tile(i, j0 + 3), kRowBytes);
  _tile_dpbsud(3, 6, 7);
  _tile_stored(0, c[j0], kRowBytes);
  _tile_stored(1, c[j0 + 1], kRowBytes);
  _tile_stored(2, c[j0 + 2], kRowBytes);
  _tile_stored(3, c[j0 + 3], kRowBytes);
}

// Σ_j sc[j] · c[j][a] over n sub-blocks: one activation row's exact super-block sum, 16 weight rows.
inline __m512i scaled_sum(const Zmm* sc, const CTiles* c, int a, int n) {
  __m512i s = _mm512_setzero_si512();
  for (int j = 0; j < n; ++j) s = _mm512_add_epi32(s, _mm512_mullo_epi32(sc[j].v, _mm512_load_si512(c[j][a])));
  return s;
}

// The same sum for Q4_K's sub-blocks (|c| ≤ 32·15·128 = 61,440, 0 ≤ sc ≤ 63), in float: each product
// is exact, and each of two partial sums of 4 products stays below 2^24 (15,482,880), so every step is
// exact and the int32 result is the integer one. Fewer port-0 µops than 32-bit multiplies.
inline __m512i scaled_sum_q4_k(const ZmmF* sc, const CTiles* c, int a) {
  __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
  for (int j = 0; j < 8; j += 2) {
    even = _mm512_fmadd_ps(sc[j].v, _mm512_cvtepi32_ps(_mm512_load_si512(c[j][a])), even);
    odd = _mm512_fmadd_ps(sc[j + 1].v, _mm512_cvtepi32_ps(_mm512_load_si512(c[j + 1][a])), odd);
  }
  return _mm512_add_epi32(_mm512_cvtps_epi32(even), _mm512_cvtps_epi32(odd));
}

// The tile kernel (contract as DotTileFn) for a weight format's Group: kSubLen and kSubs (sub-blocks
// of a super-block, a multiple of 4), kSumGroupLen (ActivationSums grouping), kBlockBytes,
// unpack(source, n_blocks), b_tile(i, j), and accumulate(i, c, a, sums, row, acc): acc plus
// super-block i's terms for activation row `row` (index a in the C tiles), vectorised over the group's
// 16 weight rows. Source: GatheredRows or InterleavedRows.
template <class Group, class Source>
void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, uint64_t act_stride,
              int n_rows, float* out, int64_t out_stride) {
  thread_local ActivationSums sums;
  thread_local Group g;
  sums.build(act, act_stride, n_rows, n, Group::kSumGroupLen);
  const int64_t nb = sums.n_blocks;
  const auto* wb = static_cast<const uint8_t*>(w);
  alignas(64) CTiles c[2][Group::kSubs];  // super-blocks i and i − 1: see below
  alignas(64) float acc[kTileActRows][kGroupRows];
  int configured = 0;
  for (int64_t o0 = 0; o0 < n_w; o0 += kGroupRows) {
    const int rows = static_cast<int>(min_of(kGroupRows, n_w - o0));
    g.unpack(Source(wb + o0 * row_bytes, row_bytes, rows, Group::kBlockBytes), nb);
    for (int a0 = 0; a0 < n_rows; a0 += kTileActRows) {
      const int m = static_cast<int>(min_of(kTileActRows, n_rows - a0));
      if (m != configured) {
        configure_tiles(Group::kSubLen, m);
        configured = m;
      }
      for (int a = 0; a < m; ++a) _mm512_store_ps(acc[a], _mm512_setzero_ps());
      // The tiles of super-block i are multiplied before super-block i − 1 is scaled: the AVX-512
      // reads of C tiles just stored wait for the stores, and this gives them other work meanwhile.
      auto scale = [&](int64_t i) {
        for (int a = 0; a < m; ++a) {
          _mm512_store_ps(acc[a], g.accumulate(i, c[i & 1], a, sums, a0 + a, _mm512_load_ps(acc[a])));
        }
      };
      for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* a_codes = act + a0 * act_stride + i * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs);
        for (int j0 = 0; j0 < Group::kSubs; j0 += 4) multiply_four(g, a_codes, act_stride, i, j0, c[i & 1]);
        if (i > 0) scale(i - 1);
      }
      scale(nb - 1);
      const auto mask = static_cast<__mmask16>((1u << rows) - 1);
      for (int a = 0; a < m; ++a) _mm512_mask_storeu_ps(out + (a0 + a) * out_stride + o0, mask, _mm512_load_ps(acc[a]));
    }
  }
  _tile_release();
}

// Small batches over the interleaved layout on AMX, with each sub-block's scale folded into the
// weight codes. A format's Planes splits every scale into two digits small enough that code × digit
// fits an unsigned byte, and lays out one B tile per (64-code chunk, digit) with the codes multiplied
// by that digit ("planes"). The tiles then sum a whole super-block per plane,
// C_p[a][w] = Σ_k Y[a][k]·B_p[k][w], and C_0 + base·C_1 is the exact integer Σ_j sc_j·sum_j that the
// VNNI kernels form with a 32-bit multiply per sub-block and row: two rows of C per activation row
// and super-block leave the tiles, where the per-sub-block tile kernel stores one per sub-block.
//
// Software pipeline over the chunk's units (group, super-block): the planes of unit u + 1 are built
// while the tiles multiply unit u and the float steps finish unit u − 1, so no tile load waits on the
// vector stores that just wrote its planes, and no vector load on the tile stores just issued.
// Planes: kBlockBytes, kSumGroupLen, Terms (what finish needs of a unit), build(source, i, planes,
// terms) and finish(terms, c, a, sums, i, acc): acc plus unit's super-block i for activation row a.
inline constexpr int kChunkCodes = 64;                  // codes per B tile (K of one TDPBSUD)
inline constexpr int kChunks = kQKK / kChunkCodes;      // 4
inline constexpr int kPlaneTileBytes = kChunkCodes / 4 * kRowBytes;  // 16 rows × 64 bytes

struct PlaneTiles {
  uint8_t b[kChunks][2][kPlaneTileBytes];  // [chunk][plane]
};
using PlaneSums = int32_t[2][kTileActRows][kGroupRows];  // [plane][activation row][weight row]

// The tiles of one unit: both planes' C over the super-block's 4 chunks (tmm0, tmm1), stored to c.
// A chunk's activation codes load into tmm4 or tmm6 and its planes into tmm5 and tmm7, alternately.
inline void multiply_planes(const PlaneTiles& t, const uint8_t* a_codes, uint64_t act_stride, PlaneSums& c) {
  const auto stride = static_cast<long>(act_stride);
  _tile_zero(0);
  _tile_zero(1);
  for (int ch = 0; ch < kChunks; ch += 2) {
    _tile_loadd(4, a_codes + kChunkCodes * ch, stride);
    _tile_loadd(5, t.b[ch][0], kRowBytes);
    _tile_dpbsud(0, 4, 5);
    _tile_loadd(7, t.b[ch][1], kRowBytes);
    _tile_dpbsud(1, 4, 7);
    _tile_loadd(6, a_codes + kChunkCodes * (ch + 1), stride);
    _tile_loadd(5, t.b[ch + 1][0], kRowBytes);
    _tile_dpbsud(0, 6, 5);
    _tile_loadd(7, t.b[ch + 1][1], kRowBytes);
    _tile_dpbsud(1, 6, 7);
  }
  _tile_stored(0, c[0], kRowBytes);
  _tile_stored(1, c[1], kRowBytes);
}

// The planes kernel (contract as DotTileFn, n_w a multiple of 16, at most 16 rows) for a format's Planes.
template <class Planes>
void dot_rows_planes(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                     uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  // Planes of units u and u + 1; terms of u − 1, u and u + 1.
  thread_local ActivationSums sums;
  alignas(64) static thread_local PlaneTiles tiles[2];
  thread_local typename Planes::Terms terms[3];
  sums.build(act, act_stride, n_rows, n, Planes::kSumGroupLen);
  const int64_t nb = sums.n_blocks, n_units = n_w / kGroupRows * nb;
  const auto* wb = static_cast<const uint8_t*>(w);
  alignas(64) PlaneSums c[2];
  alignas(64) float acc[kTileActRows][kGroupRows];
  configure_tiles(kChunkCodes, n_rows);
  auto build = [&](int64_t u) {
    const InterleavedRows src(wb + u / nb * kGroupRows * row_bytes, row_bytes, kGroupRows, Planes::kBlockBytes);
    Planes::build(src, u % nb, tiles[u & 1], terms[u % 3]);
  };
  auto multiply = [&](int64_t u) {
    const uint8_t* a_codes = act + u % nb * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs);
    multiply_planes(tiles[u & 1], a_codes, act_stride, c[u & 1]);
  };
  auto finish = [&](int64_t u) {
    const int64_t i = u % nb;
    const typename Planes::Terms& t = terms[u % 3];
    for (int a = 0; a < n_rows; ++a) {
      const __m512 prev = i == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc[a]);
      const __m512 next = Planes::finish(t, c[u & 1], a, sums, i, prev);
      if (i + 1 < nb) {
        _mm512_store_ps(acc[a], next);
      } else {
        _mm512_storeu_ps(out + a * out_stride + u / nb * kGroupRows, next);
      }
    }
  };
  if (n_units == 0) return;
  build(0);
  for (int64_t u = 0; u < n_units; ++u) {
    if (u + 1 < n_units) build(u + 1);
    multiply(u);
    if (u > 0) finish(u - 1);
  }
  finish(n_units - 1);
  _tile_release();
}

}  // namespace
}  // namespace infer::kernels::amx
