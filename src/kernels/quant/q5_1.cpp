// Q5_1 (spec §4.4): Q5_0's codes, unbiased, with a scale and a minimum: value = code·d + m.
#include <cfloat>

#include "kernels/quant/blocks.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int k = 0; k < kQK0; ++k) dst[i * kQK0 + k] = q5_code(b[i].qs, b[i].qh, k) * d + m;
  }
}

// ggml's reference writer: d = (max - min)/31, m = min, code = trunc((x - min)/d + 0.5) as a byte.
void quantize_q5_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float* x = src + i * kQK0;
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kQK0; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(min);
    uint8_t q[kQK0];
    for (int j = 0; j < kQK0; ++j) q[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
    q5_pack(q, b[i].qs, b[i].qh);
  }
}

// Against Q8_0 activations (llama.cpp pairs Q5_1 with Q8_1, whose s = fp16(d·Σqy) it stores; here
// the min term uses the exact integer Σqy): acc += (dx·dy)·Σ code·qy + m·(dy·Σqy) per block.
float dot_q5_1(const void* w, const void* act, int64_t n) {
  const auto* x = static_cast<const BlockQ5_1*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK0; ++i) {
    int32_t sumi = 0, sumy = 0;
    for (int k = 0; k < kQK0; ++k) {
      sumi += q5_code(x[i].qs, x[i].qh, k) * y[i].qs[k];
      sumy += y[i].qs[k];
    }
    const float dy = f16_to_f32(y[i].d);
    const float code_term = (f16_to_f32(x[i].d) * dy) * static_cast<float>(sumi);
    acc += code_term + f16_to_f32(x[i].m) * (dy * static_cast<float>(sumy));
  }
  return acc;
}

}  // namespace infer::kernels::ref
