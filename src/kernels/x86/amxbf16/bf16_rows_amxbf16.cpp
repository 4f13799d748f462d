// BF16 weight rows on AMX-BF16 tiles (TDPBF16PS: a 16×16 tile of f32 sums over 32 bf16 products per
// row pair), for every kernel shape of the set: decode, dot_rows and batches. One code path computes
// every (weight row, activation row) value, so it is the same whichever shape asks (invariant 7):
// C[a][w] accumulates the 32-element chunks of the row in order, one TDPBF16PS each.
//
// A tiles are activation rows read in place (the reference's bf16 bytes); B tiles are a group of 16
// weight rows, each chunk's bf16 pairs transposed into the dword columns TDPBF16PS wants, built once
// per group for all the activation rows. Tails past n are zeros on both sides.
//
// The same kernel also runs on a software model of the tile instructions (ModelTiles, the Intel SDM's
// operation order written out), so that its layout logic is tested on every AVX-512 BF16 CPU; the
// hardware itself only on a CPU with AMX-BF16, whose sums differ from that order bit for bit
// (test_bf16_amx.cpp).
#include <cstring>

#include "kernels/x86/amx/amx_common.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/quant/quant.h"
#include "kernels/matmul/row_kernels.h"

namespace infer::kernels::amx {

// Internal linkage, as avx512_common.h explains.
namespace {
constexpr int kChunk = 32;  // bf16 elements per A tile row (64 bytes): one TDPBF16PS's K
constexpr int kTileBytes = 16 * kRowBytes;
constexpr int kPassBlocks = 4;  // C tiles: activation blocks per blocks pass over a group's chunks
constexpr int kPassGroups = 4;  // C tiles: weight groups per groups pass (a short activation block)
template <int B>
struct Block {
  static constexpr int value = B;
};
// Tiles: C 0..3; B 4 and 5, A 6 and 7 (each pair loaded alternately).

// The 64-byte LDTILECFG record for m activation rows: C and A tiles m rows, B tiles 16; 64 bytes a row.
void tile_config(int m, uint8_t (&cfg)[64]) {
  std::memset(cfg, 0, sizeof(cfg));
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = kRowBytes;
    cfg[48 + t] = static_cast<uint8_t>(t == 4 || t == 5 ? kChunk / 2 : m);
  }
}

template <int c, int a, int b>
void hw_dp();
#define INFER_TILE_DP(c, a, b) \
  template <>                  \
  inline void hw_dp<c, a, b>() { _tile_dpbf16ps(c, a, b); }
#define INFER_TILE_DPS(c) INFER_TILE_DP(c, 6, 4) INFER_TILE_DP(c, 7, 4) INFER_TILE_DP(c, 6, 5)
INFER_TILE_DPS(0)
INFER_TILE_DPS(1)
INFER_TILE_DPS(2)
INFER_TILE_DPS(3)
#undef INFER_TILE_DPS
#undef INFER_TILE_DP

struct HardwareTiles : HardwareTileRegisters {
  static void configure(int m) {
    alignas(64) uint8_t cfg[64];
    tile_config(m, cfg);
    load_tile_config(cfg);
  }
  template <int c, int a, int b>
  static void dp() { hw_dp<c, a, b>(); }
};

// The tile instructions in scalar code, after the Intel SDM's pseudocode of TDPBF16PS: per C element
// and pair k, the even product added, then the odd one, each sum rounded to f32 (products of two bf16
// are exact). Denormal flushing is not modelled: the tests' values have none.
struct ModelTiles : ModelTileRegisters {
  static void configure(int m) {
    uint8_t cfg[64];
    tile_config(m, cfg);
    ModelTileRegisters::configure(cfg);
  }
  static float element(const Tile& t, int r, int i) {
    uint16_t h;
    std::memcpy(&h, t.bytes[r] + 2 * i, 2);
    return bf16_to_f32(h);
  }
  template <int c, int a, int b>
  static void dp() {
    Tile& dst = tiles()[c];
    const Tile &x = tiles()[a], &y = tiles()[b];
    for (int m = 0; m < dst.rows; ++m) {
      float acc[16];
      std::memcpy(acc, dst.bytes[m], sizeof(acc));
      for (int k = 0; k < kChunk / 2; ++k) {
        for (int n = 0; n < 16; ++n) {
          acc[n] += element(x, m, 2 * k) * element(y, k, 2 * n);
          acc[n] += element(x, m, 2 * k + 1) * element(y, k, 2 * n + 1);
        }
      }
      std::memcpy(dst.bytes[m], acc, sizeof(acc));
    }
  }
};

inline __mmask32 first_elements(int64_t len) {
  return len >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint32_t{1} << len) - 1);
}

// The first len ≤ 32 elements of a weight row chunk as 32 bf16 (zeros past len).
inline __m512i chunk_of(const uint8_t* row, int64_t len) { return _mm512_maskz_loadu_epi16(first_elements(len), row); }

// in[j] = the 16 dwords of row j; out[r] = dword r of every row (a 16×16 dword transpose).
inline void transpose16(const __m512i (&in)[16], __m512i (&out)[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // b[4i + k], lane L: rows 4i..4i+3 of dword 4L + k
    b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512i c0 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0x44), c1 = _mm512_shuffle_i32x4(b[k], b[4 + k], 0xEE);
    const __m512i c2 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0x44);
    const __m512i c3 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], 0xEE);
    out[k] = _mm512_shuffle_i32x4(c0, c2, 0x88);
    out[4 + k] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
    out[8 + k] = _mm512_shuffle_i32x4(c1, c3, 0x88);
    out[12 + k] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
  }
}

// One call's state: the B tiles of up to kPassGroups groups ([group][chunk]), the padded last chunk of
// a pass's activation rows and one C tile's sums.
struct Scratch {
  Buffer<uint8_t> b_tiles;
  alignas(64) uint16_t a_tail[kPassBlocks * kTileActRows][kChunk];
  alignas(64) float c[kTileActRows][kGroupRows];
};

// The B tiles of `rows` (≤ 16) weight rows, one per chunk.
void build_b_tiles(int64_t n, const uint8_t* w, uint64_t row_bytes, int rows, uint8_t* b_tiles) {
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    __m512i in[16], out[16];
    const int64_t len = min_of(kChunk, n - ch * kChunk);
    for (int j = 0; j < kGroupRows; ++j) {
      in[j] = j < rows ? chunk_of(w + j * row_bytes + ch * kChunk * 2, len) : _mm512_setzero_si512();
    }
    transpose16(in, out);
    uint8_t* tile = b_tiles + ch * kTileBytes;
    for (int r = 0; r < 16; ++r) _mm512_store_si512(tile + r * kRowBytes, out[r]);
  }
}

// The zero-padded last chunk of `count` activation rows (zeros past n: garbage there times a zero
// weight could be a NaN), into s.a_tail.
void pad_tail(int64_t n, const uint8_t* act, uint64_t act_stride, int count, Scratch& s) {
  const int64_t full = n / kChunk, len = n - full * kChunk;
  for (int a = 0; a < count; ++a) {
    std::memset(s.a_tail[a], 0, sizeof(s.a_tail[a]));
    std::memcpy(s.a_tail[a], act + a * act_stride + full * kChunk * 2, len * 2);
  }
}

// Stores C tile `c` (m activation rows × 16 weight rows, of which `rows` are real) to out[a * out_stride + j].
template <class T, int C>
void store_c(float (&c)[kTileActRows][kGroupRows], int m, int rows, float* out, int64_t out_stride) {
  T::template store<C>(c, kGroupRows * sizeof(float));
  const auto mask = static_cast<__mmask16>((1u << rows) - 1);
  for (int a = 0; a < m; ++a) _mm512_mask_storeu_ps(out + a * out_stride, mask, _mm512_load_ps(c[a]));
}

template <class T>
void zero_c(int count) {
  if (count > 0) T::template zero<0>();
  if (count > 1) T::template zero<1>();
  if (count > 2) T::template zero<2>();
  if (count > 3) T::template zero<3>();
}

// Blocks pass: NB (≤ 4) full blocks of activation rows from `act` on, against one group of `rows`
// weight rows whose B tiles are at `b_tiles`; out[a * out_stride + j] from the pass's first row on.
// The chunk's B tile is loaded once (tmm4), each block's activations alternately into tmm6 and tmm7.
template <class T, int NB>
void pass_blocks(int64_t n, const uint8_t* act, uint64_t act_stride, const uint8_t* b_tiles, int rows, Scratch& s,
                 float* out, int64_t out_stride) {
  const int64_t full = n / kChunk, n_chunks = (n + kChunk - 1) / kChunk;
  zero_c<T>(NB);
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    T::template load<4>(b_tiles + ch * kTileBytes, kRowBytes);
    const bool tail = ch == full;
    if (tail) pad_tail(n, act, act_stride, NB * kTileActRows, s);
    auto block = [&](auto b) {
      constexpr int B = decltype(b)::value;
      if (tail) {
        T::template load<6 + (B & 1)>(s.a_tail[B * kTileActRows], kChunk * 2);
      } else {
        T::template load<6 + (B & 1)>(act + B * kTileActRows * act_stride + ch * kChunk * 2,
                                      static_cast<long>(act_stride));
      }
      T::template dp<B, 6 + (B & 1), 4>();
    };
    if constexpr (NB > 0) block(Block<0>{});
    if constexpr (NB > 1) block(Block<1>{});
    if constexpr (NB > 2) block(Block<2>{});
    if constexpr (NB > 3) block(Block<3>{});
  }
  if constexpr (NB > 0) store_c<T, 0>(s.c, kTileActRows, rows, out, out_stride);
  if constexpr (NB > 1) store_c<T, 1>(s.c, kTileActRows, rows, out + 1 * kTileActRows * out_stride, out_stride);
  if constexpr (NB > 2) store_c<T, 2>(s.c, kTileActRows, rows, out + 2 * kTileActRows * out_stride, out_stride);
  if constexpr (NB > 3) store_c<T, 3>(s.c, kTileActRows, rows, out + 3 * kTileActRows * out_stride, out_stride);
}

// Groups pass: one block of m (< 16) activation rows against NG (≤ 4) groups of weight rows, whose B
// tiles are s.b_tiles' slots 0..NG-1 (the last group `last_rows` rows): NG independent sums per tile
// product instead of one chain, for decode and small batches. The activation tile (tmm6) is loaded
// once per chunk, the groups' B tiles alternately into tmm4 and tmm5; each group's C tile sees the
// same products in the same order as in a blocks pass.
template <class T, int NG>
void pass_groups(int64_t n, const uint8_t* act, uint64_t act_stride, int m, Scratch& s, int64_t slot_bytes,
                 int last_rows, float* out, int64_t out_stride) {
  const int64_t full = n / kChunk, n_chunks = (n + kChunk - 1) / kChunk;
  zero_c<T>(NG);
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    if (ch == full) {
      pad_tail(n, act, act_stride, m, s);
      T::template load<6>(s.a_tail[0], kChunk * 2);
    } else {
      T::template load<6>(act + ch * kChunk * 2, static_cast<long>(act_stride));
    }
    const uint8_t* bt = s.b_tiles.data() + ch * kTileBytes;
    auto group = [&](auto g) {
      constexpr int G = decltype(g)::value;
      T::template load<4 + (G & 1)>(bt + G * slot_bytes, kRowBytes);
      T::template dp<G, 6, 4 + (G & 1)>();
    };
    if constexpr (NG > 0) group(Block<0>{});
    if constexpr (NG > 1) group(Block<1>{});
    if constexpr (NG > 2) group(Block<2>{});
    if constexpr (NG > 3) group(Block<3>{});
  }
  auto rows_of = [&](int g) { return g == NG - 1 ? last_rows : kGroupRows; };
  if constexpr (NG > 0) store_c<T, 0>(s.c, m, rows_of(0), out, out_stride);
  if constexpr (NG > 1) store_c<T, 1>(s.c, m, rows_of(1), out + kGroupRows, out_stride);
  if constexpr (NG > 2) store_c<T, 2>(s.c, m, rows_of(2), out + 2 * kGroupRows, out_stride);
  if constexpr (NG > 3) store_c<T, 3>(s.c, m, rows_of(3), out + 3 * kGroupRows, out_stride);
}

// The kernel for every shape (contract as DotTileFn). Full blocks of 16 activation rows: per group of
// 16 weight rows, its B tiles built once, then blocks passes. A last short block (every decode):
// groups passes over 4 groups at a time.
template <class T>
void dot(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, uint64_t act_stride,
         int n_rows, float* out, int64_t out_stride) {
  static thread_local Scratch s;
  const int64_t n_chunks = (n + kChunk - 1) / kChunk, slot_bytes = n_chunks * kTileBytes;
  s.b_tiles.resize(static_cast<size_t>(kPassGroups * slot_bytes));
  const auto* wb = static_cast<const uint8_t*>(w);
  const int full_blocks = n_rows / kTileActRows, short_rows = n_rows % kTileActRows;
  if (full_blocks > 0) {
    T::configure(kTileActRows);
    for (int64_t g0 = 0; g0 < n_w; g0 += kGroupRows) {
      const int rows = static_cast<int>(min_of(kGroupRows, n_w - g0));
      build_b_tiles(n, wb + g0 * row_bytes, row_bytes, rows, s.b_tiles.data());
      int b0 = 0;
      for (; b0 + kPassBlocks <= full_blocks; b0 += kPassBlocks) {
        pass_blocks<T, 4>(n, act + b0 * kTileActRows * act_stride, act_stride, s.b_tiles.data(), rows, s,
                          out + b0 * kTileActRows * out_stride + g0, out_stride);
      }
      const uint8_t* a = act + b0 * kTileActRows * act_stride;
      float* o = out + b0 * kTileActRows * out_stride + g0;
      switch (full_blocks - b0) {
        case 1: pass_blocks<T, 1>(n, a, act_stride, s.b_tiles.data(), rows, s, o, out_stride); break;
        case 2: pass_blocks<T, 2>(n, a, act_stride, s.b_tiles.data(), rows, s, o, out_stride); break;
        case 3: pass_blocks<T, 3>(n, a, act_stride, s.b_tiles.data(), rows, s, o, out_stride); break;
        default: break;
      }
    }
  }
  if (short_rows > 0) {
    T::configure(short_rows);
    const uint8_t* a = act + full_blocks * kTileActRows * act_stride;
    float* o = out + full_blocks * kTileActRows * out_stride;
    for (int64_t g0 = 0; g0 < n_w; g0 += kPassGroups * kGroupRows) {
      const int64_t left = n_w - g0;
      const int ng = static_cast<int>(min_of(kPassGroups, (left + kGroupRows - 1) / kGroupRows));
      for (int q = 0; q < ng; ++q) {
        const int rows = static_cast<int>(min_of(kGroupRows, left - q * kGroupRows));
        build_b_tiles(n, wb + (g0 + q * kGroupRows) * row_bytes, row_bytes, rows, s.b_tiles.data() + q * slot_bytes);
      }
      const int last_rows = static_cast<int>(min_of(kGroupRows, left - (ng - 1) * kGroupRows));
      switch (ng) {
        case 1: pass_groups<T, 1>(n, a, act_stride, short_rows, s, slot_bytes, last_rows, o + g0, out_stride); break;
        case 2: pass_groups<T, 2>(n, a, act_stride, short_rows, s, slot_bytes, last_rows, o + g0, out_stride); break;
        case 3: pass_groups<T, 3>(n, a, act_stride, short_rows, s, slot_bytes, last_rows, o + g0, out_stride); break;
        default: pass_groups<T, 4>(n, a, act_stride, short_rows, s, slot_bytes, last_rows, o + g0, out_stride); break;
      }
    }
  }
  T::release();
}

template <class T>
void dot_rows(int64_t n, const void* w_row, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
              int64_t out_stride) {
  dot<T>(n, w_row, 0, 1, act, act_stride, n_rows, out, out_stride);
}

template <class T>
void dot_outputs(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
  dot<T>(n, w, row_bytes, n_w, act, 0, 1, out, 0);
}

template <class T>
RowKernels kernel_set(TensorType weight) {
  if (weight != TensorType::BF16) return {nullptr, nullptr, 1, 1};
  RowKernels k{dot_rows<T>, avx512::quantize_act_bf16, 1, 2};
  k.dot_outputs = dot_outputs<T>;
  k.dot_tile = dot<T>;
  return k;
}
}  // namespace

}  // namespace infer::kernels::amx

namespace infer::kernels {

RowKernels amx_bf16_row_kernels(TensorType weight) { return amx::kernel_set<amx::HardwareTiles>(weight); }

RowKernels amx_bf16_row_kernels_model(TensorType weight) { return amx::kernel_set<amx::ModelTiles>(weight); }

}  // namespace infer::kernels
