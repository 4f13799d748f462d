// Q8_0 (spec §4.5): 32 int8 codes and an f16 scale. Reference quantiser, dequantiser and Q8_0·Q8_0 dot.
#include <cmath>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

int nearest_int(float v) { return static_cast<int>(std::lrintf(v)); }

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK0; ++j) dst[i * kQK0 + j] = b[i].qs[j] * d;
  }
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float* x = src + i * kQK0;
    float amax = 0;
    for (int j = 0; j < kQK0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK0; ++j) b[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void quantize_q8_0_activation(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float* x = src + i * kQK0;
    float amax = 0;
    for (int j = 0; j < kQK0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    b[i].d = f32_to_f16(amax / 127);
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < kQK0; ++j) b[i].qs[j] = static_cast<int8_t>(nearest_int(x[j] * id));
  }
}

float dot_q8_0(const void* w, const void* act, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK0; ++i) {
    int32_t sumi = 0;
    for (int j = 0; j < kQK0; ++j) sumi += x[i].qs[j] * y[i].qs[j];
    acc += static_cast<float>(sumi) * (f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
  }
  return acc;
}

}  // namespace infer::kernels::ref
