// Inputs and CPU checks shared by the kernel tests of this directory (test_ops.cpp, test_kv_types.cpp).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/runtime/cpu_features.h"

namespace infer::kernels::test_util {

// n normally distributed floats (mean 0, deviation `scale`), the same for the same seed.
inline std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The CPU can run the AVX2 kernels (which also need FMA and F16C).
inline bool have_avx2() {
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma && f.f16c;
}

}  // namespace infer::kernels::test_util
