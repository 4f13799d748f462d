// Q5_0 (spec §4.3): Q4_0's nibble layout plus a fifth bit per element in qh, codes 0..31 biased by 16.
#include <algorithm>
#include <cmath>

#include "kernels/quant/blocks.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int k = 0; k < kQK0; ++k) dst[i * kQK0 + k] = (q5_code(b[i].qs, b[i].qh, k) - 16) * d;
  }
}

// ggml's reference writer: d = max/-16 for the signed element of largest magnitude (first one wins),
// code = min(31, trunc(x/d + 16.5)).
void quantize_q5_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float* x = src + i * kQK0;
    float amax = 0, max = 0;
    for (int j = 0; j < kQK0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    uint8_t q[kQK0];
    for (int j = 0; j < kQK0; ++j) q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(x[j] * id + 16.5f)));
    q5_pack(q, b[i].qs, b[i].qh);
  }
}

float dot_q5_0(const void* w, const void* act, int64_t n) {
  const auto* x = static_cast<const BlockQ5_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK0; ++i) {
    int32_t sumi = 0;
    for (int k = 0; k < kQK0; ++k) sumi += (q5_code(x[i].qs, x[i].qh, k) - 16) * y[i].qs[k];
    acc += (f16_to_f32(x[i].d) * f16_to_f32(y[i].d)) * static_cast<float>(sumi);
  }
  return acc;
}

}  // namespace infer::kernels::ref
