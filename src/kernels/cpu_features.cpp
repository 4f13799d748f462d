// CPUID/XGETBV detection of AVX2, FMA and F16C, and the INFER_FORCE_SCALAR override.
#include "kernels/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace infer::kernels {

namespace {
CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  const bool fma = c & (1u << 12);
  const bool f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  // The OS must save the YMM state (XCR0 bits 1 and 2), or AVX instructions fault.
  uint32_t xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6) != 6) return f;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & (1u << 5);
  f.fma = fma;
  f.f16c = f16c;
  return f;
}

bool forced_scalar() {
  const char* v = std::getenv("INFER_FORCE_SCALAR");
  return v && std::strcmp(v, "1") == 0;
}
}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool use_avx2() {
  static const bool use = [] {
    const CpuFeatures& f = cpu_features();
    return f.avx2 && f.fma && f.f16c && !forced_scalar();
  }();
  return use;
}

}  // namespace infer::kernels
