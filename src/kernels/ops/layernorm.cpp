// LayerNorm (bert; spec/architectures-more.md §0.1): mean and population variance summed in double,
// then (x - mean) · r, then · w and + b as separate f32 steps, like llama.cpp's norm, mul and add ops.
// The double sums run as 4 interleaved partial sums (element i into sum i % 4), so that they are not
// one add's latency per element (perf on `infer bench --embed`, bge-small).
#include <cmath>

#include "kernels/ops/ops.h"

namespace infer::kernels {
namespace {

// Σ term(i) over [0, n) in double: four partial sums, element i into sum i % 4, then (s0 + s1) + (s2 + s3).
template <typename Term>
double sum_in_double(int64_t n, Term term) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) s[k] += static_cast<double>(term(i + k));
  }
  for (; i < n; ++i) s[i % 4] += static_cast<double>(term(i));
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace

void layernorm(const float* x, const float* w, const float* b, float* out, int64_t n, float eps) {
  const float mean = static_cast<float>(sum_in_double(n, [x](int64_t i) { return x[i]; }) / static_cast<double>(n));
  const float variance = static_cast<float>(sum_in_double(n, [x, mean](int64_t i) {
                                              const float d = x[i] - mean;
                                              return d * d;
                                            }) /
                                            static_cast<double>(n));
  const float r = 1.0f / std::sqrt(variance + eps);
  for (int64_t i = 0; i < n; ++i) {
    float y = (x[i] - mean) * r;
    if (w) y *= w[i];
    if (b) y += b[i];
    out[i] = y;
  }
}

}  // namespace infer::kernels
