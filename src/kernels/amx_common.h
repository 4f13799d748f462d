// Helpers shared by the *_amx.cpp kernels (compiled with AVX-512 and AMX). Include only there.
//
// The tile kernels compute C[w][a] = Σ_k W[w][k]·Y[a][k] for 16 weight rows w and up to 16 activation
// rows a over one sub-block of K codes: A holds the weight codes (16 rows × K bytes, unsigned), B the
// activation codes in the VNNI layout TDPBUSD wants (K/4 rows; row r holds, for each activation row a,
// its codes 4r..4r+3), C the exact int32 sums (16 rows × a). The activations are packed once per call.
#pragma once
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* operands): a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/blocks.h"

namespace infer::kernels::amx {

inline constexpr int kGroupRows = 16;  // weight rows per A tile
inline constexpr int kMaxActRows = 16;  // activation rows per call (B and C tile columns)
inline constexpr int kBRowBytes = 64;   // B and C tile row stride in the packed buffers

// tmm0..3: C accumulators (16 × 4·n_act bytes); tmm4, tmm6: A (16 × k_sub bytes); tmm5, tmm7: B
// (k_sub/4 × 4·n_act bytes). Two A/B pairs let one sub-block load while the previous multiplies.
// The 64-byte LDTILECFG record: byte 0 palette (1), bytes 16 + 2t the row bytes of tile t, byte 48 + t
// its rows. Loaded with our own asm: GCC 12's _tile_loadconfig tells the compiler it reads only 8 bytes,
// so the stores of the rest were dropped as dead.
inline void configure_tiles(int k_sub, int n_act) {
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;
  auto set = [&](int t, int rows, int colsb) {
    cfg[16 + 2 * t] = static_cast<uint8_t>(colsb & 0xFF);
    cfg[17 + 2 * t] = static_cast<uint8_t>(colsb >> 8);
    cfg[48 + t] = static_cast<uint8_t>(rows);
  };
  for (int t = 0; t < 4; ++t) set(t, kGroupRows, 4 * n_act);
  for (int t : {4, 6}) set(t, kGroupRows, k_sub);
  for (int t : {5, 7}) set(t, k_sub / 4, 4 * n_act);
  struct Record {
    uint8_t bytes[64];
  };
  __asm__ volatile("ldtilecfg %0" : : "m"(*reinterpret_cast<const Record*>(cfg)));
}

// Q8_K activation rows packed for the tile kernels, per super-block i:
//   b_tiles: for each sub-block s of k_sub codes, k_sub/4 rows of kBRowBytes (VNNI layout);
//   dy[i][a]: the row's scale (0 for a ≥ n_act);
//   bsum_pairs[i][p][a]: the int16 pair (sums[2p], sums[2p+1]) as one int32, where sums[g] is the sum of
//   codes of group g of `group_len` codes (16: the block's bsums; 32: pairs of them), for vpdpwssd.
struct PackedActivations {
  int n_act = 0, k_sub = 0, n_pairs = 0;
  int64_t n_blocks = 0;
  std::vector<uint8_t> b_tiles;
  std::vector<float> dy;
  std::vector<int32_t> bsum_pairs;

  const uint8_t* b_tile(int64_t i, int s) const {
    return b_tiles.data() + ((i * (kQKK / k_sub) + s) * (k_sub / 4)) * kBRowBytes;
  }
  const float* scales(int64_t i) const { return dy.data() + i * kMaxActRows; }
  const int32_t* pairs(int64_t i, int p) const { return bsum_pairs.data() + (i * n_pairs + p) * kMaxActRows; }

  void pack(const uint8_t* act, uint64_t act_stride, int rows, int64_t n, int sub_len, int group_len) {
    n_act = rows;
    k_sub = sub_len;
    n_blocks = n / kQKK;
    const int n_groups = kQKK / group_len;
    n_pairs = n_groups / 2;
    b_tiles.assign(static_cast<size_t>(n_blocks) * kQKK / 4 * kBRowBytes, 0);
    dy.assign(static_cast<size_t>(n_blocks) * kMaxActRows, 0.0f);
    bsum_pairs.assign(static_cast<size_t>(n_blocks * n_pairs) * kMaxActRows, 0);
    for (int a = 0; a < rows; ++a) {
      const auto* y = reinterpret_cast<const BlockQ8_K*>(act + a * act_stride);
      for (int64_t i = 0; i < n_blocks; ++i) {
        dy[i * kMaxActRows + a] = y[i].d;
        int16_t sums[kQKK / 16] = {};
        for (int g = 0; g < n_groups; ++g) {
          int sum = 0;
          for (int h = 0; h < group_len / 16; ++h) sum += y[i].bsums[g * (group_len / 16) + h];
          sums[g] = static_cast<int16_t>(sum);  // |sum| ≤ 32·128: fits
        }
        for (int p = 0; p < n_pairs; ++p) {
          const uint32_t lo = static_cast<uint16_t>(sums[2 * p]), hi = static_cast<uint16_t>(sums[2 * p + 1]);
          bsum_pairs[(i * n_pairs + p) * kMaxActRows + a] = static_cast<int32_t>(lo | hi << 16);
        }
        for (int s = 0; s < kQKK / sub_len; ++s) {
          uint8_t* tile = const_cast<uint8_t*>(b_tile(i, s));
          for (int r = 0; r < sub_len / 4; ++r) std::memcpy(tile + r * kBRowBytes + 4 * a, y[i].qs + s * sub_len + 4 * r, 4);
        }
      }
    }
  }
};

// Writes acc[w][a] (w < n_w, a < n_act) to out[a * out_stride + w].
inline void store_outputs(const float (&acc)[kGroupRows][kMaxActRows], int n_w, int n_act, float* out,
                          int64_t out_stride) {
  for (int w = 0; w < n_w; ++w) {
    for (int a = 0; a < n_act; ++a) out[a * out_stride + w] = acc[w][a];
  }
}

}  // namespace infer::kernels::amx
