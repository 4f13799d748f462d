// AVX2 RMSNorm: squares in f32 (as the reference), summed into f64 lanes; same formula otherwise.
#include <immintrin.h>

#include <cmath>

#include "kernels/x86/avx2/ops_avx2.h"

namespace infer::kernels {

void rmsnorm_avx2(const float* x, const float* w, float* out, int64_t n, float eps) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(acc0, acc1));
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float r = 1.0f / std::sqrt(mean + eps);

  const __m256 rv = _mm256_set1_ps(r);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), rv);
    if (w) y = _mm256_mul_ps(y, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(out + i, y);
  }
  for (; i < n; ++i) {
    const float y = x[i] * r;
    out[i] = w ? y * w[i] : y;
  }
}

}  // namespace infer::kernels
