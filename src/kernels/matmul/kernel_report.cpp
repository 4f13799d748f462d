// CPU model and kernel-family names for reports (kernel_report.h).
#include "kernels/matmul/kernel_report.h"

#include <cpuid.h>

#include <cstring>

#include "kernels/runtime/cpu_features.h"
#include "kernels/matmul/decode_streams.h"
#include "kernels/matmul/kernel_plan.h"

namespace infer::kernels {

namespace {
std::string brand_string() {
  if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000004u) return "unknown";
  char brand[49] = {};
  for (unsigned leaf = 0; leaf < 3; ++leaf) {
    unsigned r[4];
    __get_cpuid(0x80000002u + leaf, &r[0], &r[1], &r[2], &r[3]);
    std::memcpy(brand + 16 * leaf, r, sizeof(r));
  }
  const std::string s(brand);
  const size_t first = s.find_first_not_of(' '), last = s.find_last_not_of(' ');
  return first == std::string::npos ? "unknown" : s.substr(first, last - first + 1);
}
}  // namespace

std::string cpu_model() {
  std::string s = brand_string();
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    // Display family and model (CPUID leaf 1 with the extended fields), as /proc/cpuinfo shows them.
    const unsigned base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
    const unsigned family = base_family == 0xF ? base_family + ((a >> 20) & 0xFF) : base_family;
    const unsigned model = base_family == 0x6 || base_family == 0xF ? base_model | (((a >> 16) & 0xF) << 4) : base_model;
    s += " (family " + std::to_string(family) + ", model " + std::to_string(model) + ")";
  }
  return s;
}

KernelFamilies kernel_families(TensorType weight, bool interleaved) {
  constexpr int64_t kPrefillRows = 512;
  return {kernel_name(weight, plan_matmul(weight, interleaved, 1)).family,
          kernel_name(weight, plan_matmul(weight, interleaved, kPrefillRows)).family};
}

int interleaved_decode_streams() { return decode_streams_chosen(); }

}  // namespace infer::kernels
