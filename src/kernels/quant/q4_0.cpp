// Q4_0 (spec §4.1): byte j holds elements j (low nibble) and j+16 (high), codes 0..15 biased by 8.
#include <algorithm>
#include <cmath>

#include "kernels/quant/blocks.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK0 / 2; ++j) {
      dst[i * kQK0 + j] = ((b[i].qs[j] & 0x0F) - 8) * d;
      dst[i * kQK0 + j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void quantize_q4_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float* x = src + i * kQK0;
    float amax = 0, max = 0;  // max: the signed element of largest magnitude (first one wins)
    for (int j = 0; j < kQK0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK0 / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      b[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

float dot_q4_0(const void* w, const void* act, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK0; ++i) {
    int32_t sumi = 0;
    for (int j = 0; j < kQK0 / 2; ++j) {
      sumi += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
    }
    acc += static_cast<float>(sumi) * (f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
  }
  return acc;
}

}  // namespace infer::kernels::ref
