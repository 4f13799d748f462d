// Q5_K (spec §5.5): Q4_K's layout plus qh, whose bit b of byte l is the 5th bit of element 32b + l.
#include "kernels/quant/blocks.h"
#include "kernels/quant/k_quantize.h"
#include "kernels/quant/k_superblock.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

namespace {
int q5_k_code(const BlockQ5_K& b, int e) {
  const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
  const int low4 = (e % 64) < 32 ? (byte & 0x0F) : (byte >> 4);
  const int hbit = (b.qh[e % 32] >> (e / 32)) & 1;
  return low4 + 16 * hbit;
}
}  // namespace

void dequantize_q5_k(const void* src, float* dst, int64_t n) {
  dequantize_k_superblocks(static_cast<const BlockQ5_K*>(src), dst, n, q5_k_code);
}

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t codes[kQKK];
    const KScales ks = quantize_k_superblock(src + i * kQKK, 31, codes);
    b[i].d = ks.d;
    b[i].dmin = ks.dmin;
    pack_k_scales(ks.sc, ks.m, b[i].scales);
    for (int l = 0; l < 32; ++l) b[i].qh[l] = 0;
    for (int e = 0; e < kQKK; ++e) {
      if (codes[e] & 16) b[i].qh[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
    }
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        b[i].qs[32 * c + l] =
            static_cast<uint8_t>((codes[64 * c + l] & 15) | ((codes[64 * c + 32 + l] & 15) << 4));
      }
    }
  }
}

float dot_q5_k(const void* w, const void* act, int64_t n) {
  return dot_k_superblocks(static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(act), n, q5_k_code);
}

}  // namespace infer::kernels::ref
