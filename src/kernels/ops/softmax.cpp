// Softmax as llama.cpp's attention does it (spec §3.5): subtract the max, expf, sum in double,
// multiply by the f32 reciprocal of the sum.
#include <cmath>

#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/ops.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx512/ops_avx512.h"

namespace infer::kernels {

void softmax_ref(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void softmax(float* x, int64_t n) {
  if (use_avx512()) {
    softmax_avx512(x, n);
  } else if (use_avx2()) {
    softmax_avx2(x, n);
  } else {
    softmax_ref(x, n);
  }
}

}  // namespace infer::kernels
