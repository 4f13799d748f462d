// RMSNorm (spec/architectures.md §3.2): sum of squares in double, eps inside the square root, then
// (x · r) · w as two roundings, like llama.cpp's separate norm and mul ops.
#include <cmath>

#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/ops.h"
#include "kernels/x86/avx2/ops_avx2.h"

namespace infer::kernels {

void rmsnorm_ref(const float* x, const float* w, float* out, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float r = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float y = x[i] * r;
    out[i] = w ? y * w[i] : y;
  }
}

void rmsnorm(const float* x, const float* w, float* out, int64_t n, float eps) {
  if (use_avx2()) {
    rmsnorm_avx2(x, w, out, n, eps);
  } else {
    rmsnorm_ref(x, w, out, n, eps);
  }
}

}  // namespace infer::kernels
