// Q4_K (spec §5.4): 256-element super-blocks of 8 sub-blocks with 6-bit scales and mins.
// Byte qs[32c + l] holds element 64c + l (low nibble) and 64c + 32 + l (high nibble).
#include <algorithm>
#include <cmath>

#include "kernels/blocks.h"
#include "kernels/formats.h"
#include "kernels/k_quantize.h"
#include "kernels/quant.h"

namespace infer::kernels::ref {

namespace {
int q4_k_code(const BlockQ4_K& b, int e) {
  const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
  return (e % 64) < 32 ? (byte & 0x0F) : (byte >> 4);
}
}  // namespace

void dequantize_q4_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t sc[8], m[8];
    unpack_k_scales(b[i].scales, sc, m);
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const float d1 = d * sc[e / 32];
      const float m1 = dmin * m[e / 32];
      const float v = d1 * q4_k_code(b[i], e);
      dst[i * kQKK + e] = v - m1;
    }
  }
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
  const auto* x = static_cast<const BlockQ4_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  float acc = 0;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t sc[8], m[8];
    unpack_k_scales(x[i].scales, sc, m);
    int32_t sumi = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t isum = 0;
      for (int l = 0; l < 32; ++l) isum += q4_k_code(x[i], 32 * j + l) * y[i].qs[32 * j + l];
      sumi += sc[j] * isum;
    }
    int32_t summ = 0;
    for (int g = 0; g < 16; ++g) summ += y[i].bsums[g] * m[g / 2];
    const float dxy = f16_to_f32(x[i].d) * y[i].d;
    const float dmxy = f16_to_f32(x[i].dmin) * y[i].d;
    acc += dxy * static_cast<float>(sumi);
    acc -= dmxy * static_cast<float>(summ);
  }
  return acc;
}

}  // namespace infer::kernels::ref
