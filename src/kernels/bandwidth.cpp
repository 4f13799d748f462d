// The bandwidth probe: parallel first touch, then timed parallel sums (best of `repeats`).
#include "kernels/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "kernels/cpu_features.h"

namespace infer::kernels {

float sum_floats_avx2(const float* p, size_t n);  // bandwidth_avx2.cpp

namespace {
float sum_floats_scalar(const float* p, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
  }
  for (; i < n; ++i) acc[0] += p[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
}  // namespace

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int repeats) {
  const size_t n = std::max<size_t>(bytes / sizeof(float), 1024) / 16 * 16;
  std::unique_ptr<float, FreeDeleter> data(static_cast<float*>(std::aligned_alloc(64, n * sizeof(float))));
  if (!data) throw std::bad_alloc();
  float* p = data.get();
  const int threads = pool.size();
  // Each thread touches the slice it will read, so pages land near it.
  pool.run([&](int t) {
    const Range r = split_range(static_cast<int64_t>(n), t, threads, 16);
    std::fill(p + r.begin, p + r.end, 1.0f);
  });
  const bool avx2 = use_avx2();
  std::vector<float> sums(threads);
  double best = 0;
  for (int rep = 0; rep < std::max(1, repeats); ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int t) {
      const Range r = split_range(static_cast<int64_t>(n), t, threads, 16);
      const size_t len = static_cast<size_t>(r.end - r.begin);
      sums[t] = avx2 ? sum_floats_avx2(p + r.begin, len) : sum_floats_scalar(p + r.begin, len);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(float)) / seconds / 1e9);
  }
  // Keep the sums observable so that the reads cannot be optimised away.
  volatile float sink = 0;
  for (float s : sums) sink = sink + s;
  return best;
}

}  // namespace infer::kernels
