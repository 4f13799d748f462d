// AVX2 streaming sums for the bandwidth probe, in two read patterns: eight independent accumulators
// (loads issued as fast as the core can) and one accumulator (loads paced by the add latency). Which
// one reads faster depends on the machine: on some hosts the hardware prefetcher keeps up better with
// the paced stream, so the probe takes the best of both.
#include <immintrin.h>

#include <cstddef>

namespace infer::kernels {

namespace {
float lanes_sum(__m256 s) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}
}  // namespace

float sum_floats_avx2(const float* p, size_t n) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 8; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_loadu_ps(p + i + 8 * k));
  }
  __m256 s = _mm256_setzero_ps();
  for (auto& a : acc) s = _mm256_add_ps(s, a);
  float total = lanes_sum(s);
  for (; i < n; ++i) total += p[i];
  return total;
}

float sum_floats_paced_avx2(const float* p, size_t n) {
  __m256 acc = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(p + i));
  float total = lanes_sum(acc);
  for (; i < n; ++i) total += p[i];
  return total;
}

}  // namespace infer::kernels
