// CPUID/XGETBV detection of AVX2, FMA, F16C, AVX-512 and AMX (INT8, BF16); the INFER_FORCE_SCALAR and INFER_NO_AMX
// overrides; the one-time request for the AMX tile state and the one-time 512-bit FMA probe.
#include "kernels/runtime/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "kernels/x86/avx512/avx512_kernels.h"

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
  // AVX-512 F (b16), BW (b30), VL (b31), VNNI (c11); the OS saves opmask and ZMM state (XCR0 bits 5-7).
  f.avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) && (c & (1u << 11)) &&
             (xcr0_lo & 0xE0) == 0xE0;
  // AVX-512 BF16: leaf 7 sub-leaf 1, a5.
  if (f.avx512 && a >= 1) {
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512_bf16 = a1 & (1u << 5);
  }
  // AMX-TILE (d24) and AMX-INT8 (d25); XTILECFG and XTILEDATA enabled in XCR0 (bits 17, 18).
  f.amx_int8 = (d & (1u << 24)) && (d & (1u << 25)) && (xcr0_lo & 0x60000) == 0x60000;
  f.amx_bf16 = f.amx_int8 && (d & (1u << 22));  // AMX-BF16: d22
  return f;
}

bool env_is_1(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

// /proc/self/status "Seccomp: 2" means a filter is installed (for example by systemd).
bool under_seccomp_filter() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Seccomp:", 0) == 0) return line.find('2') != std::string::npos;
  }
  return false;
}

// Linux (5.16+) hands out the 8 KiB AMX tile state only on request; without it tile instructions fault.
bool request_amx_state() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

bool forced_scalar() { return env_is_1("INFER_FORCE_SCALAR"); }
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

bool use_avx512() {
  static const bool use = use_avx2() && cpu_features().avx512 && !env_is_1("INFER_NO_AVX512");
  return use;
}

bool use_avx512_bf16() {
  static const bool use = use_avx512() && cpu_features().avx512_bf16;
  return use;
}

bool use_avx512_fma_tiles() {
  static const bool use = use_avx512() && avx512::fma512_time_ratio() < kFullWidthFmaRatio;
  return use;
}

bool use_amx() {
  static const bool use = [] {
    const CpuFeatures& f = cpu_features();
    if (!use_avx2() || !f.avx512 || !f.amx_int8 || env_is_1("INFER_NO_AMX")) return false;
    return !under_seccomp_filter() && request_amx_state();
  }();
  return use;
}

bool use_amx_bf16() {
  static const bool use = use_amx() && use_avx512_bf16() && cpu_features().amx_bf16;
  return use;
}

}  // namespace infer::kernels
