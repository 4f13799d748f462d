// Q4_K (spec §5.4): 256-element super-blocks of 8 sub-blocks with 6-bit scales and mins.
// Byte qs[32c + l] holds element 64c + l (low nibble) and 64c + 32 + l (high nibble).
#include <algorithm>
#include <cmath>

#include "kernels/quant/blocks.h"
#include "kernels/quant/k_quantize.h"
#include "kernels/quant/k_superblock.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

namespace {
int q4_k_code(const BlockQ4_K& b, int e) {
  const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
  return (e % 64) < 32 ? (byte & 0x0F) : (byte >> 4);
}
}  // namespace

void dequantize_q4_k(const void* src, float* dst, int64_t n) {
  dequantize_k_superblocks(static_cast<const BlockQ4_K*>(src), dst, n, q4_k_code);
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t codes[kQKK];
    const KScales ks = quantize_k_superblock(src + i * kQKK, 15, codes);
    b[i].d = ks.d;
    b[i].dmin = ks.dmin;
    pack_k_scales(ks.sc, ks.m, b[i].scales);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        b[i].qs[32 * c + l] = static_cast<uint8_t>(codes[64 * c + l] | (codes[64 * c + 32 + l] << 4));
      }
    }
  }
}

float dot_q4_k(const void* w, const void* act, int64_t n) {
  return dot_k_superblocks(static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(act), n, q4_k_code);
}

}  // namespace infer::kernels::ref
