// Shared reader for Q4_K and Q5_K super-blocks (spec §5.4, §5.5): both are x = d·sc·q − dmin·m over
// 8 sub-blocks of 32 with the 12-byte packed 6-bit scales and mins; they differ only in where the
// code q of an element is stored, which the caller passes as `code(block, e)`. Internal to src/kernels.
#pragma once
#include <cstdint>

#include "kernels/quant/blocks.h"
#include "kernels/quant/quant.h"

namespace infer::kernels::ref {

// Dequantises n elements (a multiple of 256) of Q4_K or Q5_K blocks into dst.
template <typename Block, typename Code>
void dequantize_k_superblocks(const Block* b, float* dst, int64_t n, Code code) {
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t sc[8], m[8];
    unpack_k_scales(b[i].scales, sc, m);
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const float d1 = d * sc[e / 32];
      const float m1 = dmin * m[e / 32];
      const float v = d1 * code(b[i], e);
      dst[i * kQKK + e] = v - m1;
    }
  }
}

// Dot product of n weights in Q4_K or Q5_K blocks with n activations in Q8_K blocks: integer sums per
// sub-block, the mins applied once per super-block through the Q8_K block sums.
template <typename Block, typename Code>
float dot_k_superblocks(const Block* x, const BlockQ8_K* y, int64_t n, Code code) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t sc[8], m[8];
    unpack_k_scales(x[i].scales, sc, m);
    int32_t sumi = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t isum = 0;
      for (int l = 0; l < 32; ++l) isum += code(x[i], 32 * j + l) * y[i].qs[32 * j + l];
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
