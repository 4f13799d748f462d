// The bandwidth probe: parallel first touch, then timed parallel sums (best of `repeats`). The array
// sits on transparent huge pages where the kernel offers them (THP "madvise" or "always"), so that the
// probe measures the memory, not 4 KiB TLB misses: the ceiling is the best the machine can read.
#include "kernels/runtime/bandwidth.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "kernels/runtime/cpu_features.h"

namespace infer::kernels {

float sum_floats_avx2(const float* p, size_t n);        // bandwidth_avx2.cpp
float sum_floats_paced_avx2(const float* p, size_t n);

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

constexpr size_t kHugePage = size_t(2) << 20;

struct Unmap {
  size_t bytes;
  void operator()(float* p) const { ::munmap(p, bytes); }
};
}  // namespace

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int repeats) {
  const size_t n = std::max<size_t>(bytes / sizeof(float), 1024) / 16 * 16;
  // 2 MiB-aligned (mmap gives page alignment; over-allocate and start at the first huge-page boundary).
  const size_t mapped = n * sizeof(float) + kHugePage;
  void* raw = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  std::unique_ptr<float, Unmap> mapping(static_cast<float*>(raw), Unmap{mapped});
  const auto aligned = (reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) / kHugePage * kHugePage;
  ::madvise(reinterpret_cast<void*>(aligned), n * sizeof(float), MADV_HUGEPAGE);  // advice only
  float* p = reinterpret_cast<float*>(aligned);
  const int threads = pool.size();
  // Each thread touches the slice it will read, so pages land near it.
  pool.run([&](int t) {
    const Range r = split_range(static_cast<int64_t>(n), t, threads, 16);
    std::fill(p + r.begin, p + r.end, 1.0f);
  });
  const bool avx2 = use_avx2();
  std::vector<float> sums(threads);
  double best = 0;
  // Each repetition times both read patterns (AVX2 only; see bandwidth_avx2.cpp); the best rate wins.
  for (int rep = 0; rep < 2 * std::max(1, repeats); ++rep) {
    const bool paced = rep % 2 == 1;
    if (paced && !avx2) continue;
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int t) {
      const Range r = split_range(static_cast<int64_t>(n), t, threads, 16);
      const size_t len = static_cast<size_t>(r.end - r.begin);
      const float* q = p + r.begin;
      sums[t] = !avx2 ? sum_floats_scalar(q, len) : paced ? sum_floats_paced_avx2(q, len) : sum_floats_avx2(q, len);
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
