// The int8 multiply-add peak of one core, the yardstick of the small-batch matmul benchmarks
// (bench_kernels BM_DecodeQwen3Rows): how many VPDPBUSD of 512-bit vectors (64 multiply-adds each) it
// retires a second. AMD Zen 4 runs one a cycle as two 256-bit halves; Intel Xeons and Zen 5 two.
#include <time.h>

#include "kernels/x86/avx512/avx512_common.h"
#include "kernels/x86/avx512/avx512_kernels.h"

namespace infer::kernels::avx512 {

// Internal linkage, as avx512_common.h explains.
namespace {

constexpr int kChains = 12;  // independent chains: more than latency × units on any of these CPUs
constexpr int kSteps = 1 << 16;

double now_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Seconds for kSteps × kChains VPDPBUSD; the sums go to `sink` so that the compiler keeps the work.
double vnni_seconds(int32_t* sink) {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  const double start = now_seconds();
  for (int s = 0; s < kSteps; ++s) {
    asm volatile("" : "+v"(a), "+v"(b));  // fresh operands every step: nothing is hoisted or folded
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  }
  const double seconds = now_seconds() - start;
  __m512i total = acc[0];
  for (int c = 1; c < kChains; ++c) total = _mm512_add_epi32(total, acc[c]);
  *sink += _mm512_reduce_add_epi32(total);
  return seconds;
}
}  // namespace

double vnni_macs_per_second() {
  int32_t sink = 0;
  double best = 1e9;
  // The first round is a warm-up (frequency and power states settle); the fastest of the others
  // stands, since a busy machine only ever adds time.
  for (int round = 0; round < 6; ++round) {
    const double t = vnni_seconds(&sink);
    if (round > 0 && t < best) best = t;
  }
  volatile int32_t keep = sink;
  (void)keep;
  return 64.0 * kChains * kSteps / best;
}

}  // namespace infer::kernels::avx512
