// AVX2 streaming sum for the bandwidth probe: 8 independent accumulators keep loads in flight.
#include <immintrin.h>

#include <cstddef>

namespace infer::kernels {

float sum_floats_avx2(const float* p, size_t n) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 8; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_loadu_ps(p + i + 8 * k));
  }
  __m256 s = _mm256_setzero_ps();
  for (auto& a : acc) s = _mm256_add_ps(s, a);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  for (; i < n; ++i) total += p[i];
  return total;
}

}  // namespace infer::kernels
