// AVX2 softmax: vector max, vectorised exp, sum in f64 lanes (fixed order for a given n).
#include <immintrin.h>

#include <cmath>

#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx2/vec_exp_avx2.h"

namespace infer::kernels {

void softmax_avx2(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  int64_t i = 0;
  if (n >= 8) {
    __m256 m = _mm256_loadu_ps(x);
    for (i = 8; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    for (float l : lanes) max = l > max ? l : max;
  }
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;

  const __m256 mv = _mm256_set1_ps(max);
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
    _mm256_storeu_ps(x + i, e);
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double dl[4];
  _mm256_store_pd(dl, _mm256_add_pd(acc0, acc1));
  double sum = (dl[0] + dl[1]) + (dl[2] + dl[3]);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  const __m256 iv = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
  for (; i < n; ++i) x[i] *= inv;
}

}  // namespace infer::kernels
