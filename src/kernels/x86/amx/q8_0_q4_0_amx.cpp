// Q8_0 and Q4_0 batches on AMX-INT8 tiles, over q8_0_q4_0_groups_avx512.h's groups (the row layout
// and the interleaved one): a group's block b, its codes transposed into 8 vectors of 16 weight rows,
// is already a B tile (8 rows × 64 bytes: row k holds codes 4k..4k+3 of every weight row), and the
// activation codes of a block are an A tile read in place (16 activation rows × 32 bytes, the
// BlockQ8_0F rows' stride apart). One TDPBSUD per block gives the exact sums Σ y·u of 16 × 16 (weight
// row, activation row) pairs; the offsets and the float step are the VNNI kernel's, acc = acc +
// float(S)·(dw·dy) block by block, so every output is bitwise what it and the references give.
//
// The same kernel also runs on a software model of the tile instructions (integer sums, so the model
// is exact), so that its layout logic is tested on every AVX-512 CPU (test_q8_0_q4_0_vnni.cpp).
#include "kernels/x86/amx/amx_common.h"
#include "kernels/x86/amx/amx_kernels.h"
#include "kernels/x86/avx512/q8_0_q4_0_groups_avx512.h"
#include "kernels/matmul/row_kernels.h"

namespace infer::kernels::amx {

// Internal linkage, as avx512_common.h explains.
namespace {
constexpr int kBlockCodes = kQK0;  // K of one TDPBSUD: a Q8_0 block
constexpr int kPassBlocks = 4;     // C tiles: blocks multiplied before their sums are scaled

template <int c, int a, int b>
void hw_dpbsud();
#define INFER_TILE_DP(c, a, b) \
  template <>                  \
  inline void hw_dpbsud<c, a, b>() { _tile_dpbsud(c, a, b); }
INFER_TILE_DP(0, 4, 5)
INFER_TILE_DP(1, 6, 7)
INFER_TILE_DP(2, 4, 5)
INFER_TILE_DP(3, 6, 7)
#undef INFER_TILE_DP

struct HardwareTiles : HardwareTileRegisters {
  static void configure(int m) { configure_tiles(kBlockCodes, m); }
  template <int c, int a, int b>
  static void dp() { hw_dpbsud<c, a, b>(); }
};

// TDPBSUD in scalar code (Intel SDM): C[m][n] += Σ_k Σ_i int8(A[m][4k + i])·uint8(B[k][4n + i]) over the
// A tile's colsb/4 dwords; exact, as the hardware's.
struct ModelTiles : ModelTileRegisters {
  static void configure(int m) {
    uint8_t cfg[64];
    int_tile_config(kBlockCodes, m, cfg);
    ModelTileRegisters::configure(cfg);
  }
  template <int c, int a, int b>
  static void dp() {
    Tile& dst = tiles()[c];
    const Tile &x = tiles()[a], &y = tiles()[b];
    for (int m = 0; m < dst.rows; ++m) {
      int32_t acc[16];
      std::memcpy(acc, dst.bytes[m], sizeof(acc));
      for (int k = 0; k < x.colsb / 4; ++k) {
        for (int n = 0; n < dst.colsb / 4; ++n) {
          for (int i = 0; i < 4; ++i) {
            acc[n] += static_cast<int8_t>(x.bytes[m][4 * k + i]) * static_cast<int32_t>(y.bytes[k][4 * n + i]);
          }
        }
      }
      std::memcpy(dst.bytes[m], acc, sizeof(acc));
    }
  }
};

using avx512::GroupBlock;
using CTile = int32_t[kTileActRows][kGroupRows];  // [activation row][weight row]

// Block b0 + J of the group (B tile) times the activation rows' block (A tile) into C tile J, stored
// to c[J]. A and B tiles alternate between tmm4/5 and tmm6/7.
template <class T, int J>
void multiply_block(const GroupBlock* g, int64_t b0, const uint8_t* a, uint64_t act_stride, CTile* c) {
  constexpr int kA = 4 + 2 * (J & 1), kB = kA + 1;
  T::template zero<J>();
  T::template load<kA>(a + (b0 + J) * sizeof(BlockQ8_0F) + offsetof(BlockQ8_0F, qs), static_cast<long>(act_stride));
  T::template load<kB>(g[b0 + J].codes, kRowBytes);
  T::template dp<J, kA, kB>();
  T::template store<J>(c[J], kRowBytes);
}

template <class T>
struct AmxPass {
  static constexpr int kRowsUnit = kTileActRows;

  // Every row of the slice: blocks of 16 activation rows, kPassBlocks blocks of the row a pass through
  // the C tiles, each then scaled in block order after the earlier slices' sums.
  static void tile_rows(const avx512::TileSlice<GroupBlock>& t) {
    alignas(64) CTile c[kPassBlocks];
    alignas(64) float acc[kTileActRows][kGroupRows];
    const auto keep = static_cast<__mmask16>((1u << t.count) - 1);
    for (int64_t a0 = 0; a0 < t.rows; a0 += kTileActRows) {
      const int m = static_cast<int>(min_of(kTileActRows, t.rows - a0));
      T::configure(m);
      const uint8_t* a = t.act + a0 * t.act_stride + t.b0 * sizeof(BlockQ8_0F);  // block b0 of row a0
      float* out = t.out + a0 * t.out_stride;
      for (int r = 0; r < m; ++r) {
        _mm512_store_ps(acc[r], t.b0 ? _mm512_maskz_loadu_ps(keep, out + r * t.out_stride) : _mm512_setzero_ps());
      }
      for (int64_t b0 = 0; b0 < t.nb; b0 += kPassBlocks) {
        const int blocks = static_cast<int>(min_of(kPassBlocks, t.nb - b0));
        multiply_block<T, 0>(t.g, b0, a, t.act_stride, c);
        if (blocks > 1) multiply_block<T, 1>(t.g, b0, a, t.act_stride, c);
        if (blocks > 2) multiply_block<T, 2>(t.g, b0, a, t.act_stride, c);
        if (blocks > 3) multiply_block<T, 3>(t.g, b0, a, t.act_stride, c);
        for (int r = 0; r < m; ++r) {
          const auto* y = reinterpret_cast<const BlockQ8_0F*>(a + r * t.act_stride);
          __m512 sum = _mm512_load_ps(acc[r]);
          for (int j = 0; j < blocks; ++j) {
            const int64_t b = b0 + j;
            const __m512i s = _mm512_add_epi32(_mm512_load_si512(c[j][r]),
                                               _mm512_set1_epi32(t.offsets->at(a0 + r, t.b0 + b)));
            const __m512 d = _mm512_mul_ps(t.g[b].dw, _mm512_set1_ps(y[b].d));
            sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_cvtepi32_ps(s), d));
          }
          _mm512_store_ps(acc[r], sum);
        }
      }
      for (int r = 0; r < m; ++r) _mm512_mask_storeu_ps(out + r * t.out_stride, keep, _mm512_load_ps(acc[r]));
    }
  }
  static void done() { T::release(); }
};

template <class Codes, bool Interleaved, class T>
void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, uint64_t act_stride,
              int n_rows, float* out, int64_t out_stride) {
  avx512::Groups<Codes>::template dot_tile<Interleaved, AmxPass<T>>(n, w, row_bytes, n_w, act, act_stride, n_rows,
                                                                    out, out_stride);
}

template <class T>
DotTileFn tile_kernel(TensorType weight, bool interleaved) {
  switch (weight) {
    case TensorType::Q8_0:
      return interleaved ? dot_tile<avx512::CodesQ8_0, true, T> : dot_tile<avx512::CodesQ8_0, false, T>;
    case TensorType::Q4_0:
      return interleaved ? dot_tile<avx512::CodesQ4_0, true, T> : dot_tile<avx512::CodesQ4_0, false, T>;
    default: return nullptr;
  }
}
}  // namespace

void dot_tile_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<avx512::CodesQ8_0, false, HardwareTiles>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<avx512::CodesQ4_0, false, HardwareTiles>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_interleaved_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<avx512::CodesQ8_0, true, HardwareTiles>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_interleaved_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                               uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile<avx512::CodesQ4_0, true, HardwareTiles>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::amx

namespace infer::kernels {

DotTileFn amx_int8_tile_model(TensorType weight, bool interleaved) {
  return amx::tile_kernel<amx::ModelTiles>(weight, interleaved);
}

}  // namespace infer::kernels
