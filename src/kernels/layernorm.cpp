// LayerNorm (bert; spec/architectures-more.md §0.1): mean and population variance summed in double,
// then (x - mean) · r, then · w and + b as separate f32 steps, like llama.cpp's norm, mul and add ops.
#include <cmath>

#include "kernels/ops.h"

namespace infer::kernels {

void layernorm(const float* x, const float* w, const float* b, float* out, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sum2 = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    sum2 += static_cast<double>(d * d);
  }
  const float variance = static_cast<float>(sum2 / static_cast<double>(n));
  const float r = 1.0f / std::sqrt(variance + eps);
  for (int64_t i = 0; i < n; ++i) {
    float y = (x[i] - mean) * r;
    if (w) y *= w[i];
    if (b) y += b[i];
    out[i] = y;
  }
}

}  // namespace infer::kernels
