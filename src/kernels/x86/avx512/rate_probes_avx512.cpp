// Throughput probes of AVX-512 arithmetic. fma512_time_ratio is behind use_avx512_fma_tiles: some
// AVX-512 CPUs (AMD Zen 4) run a 512-bit FMA as two 256-bit halves, others (Intel Xeons with two FMA
// units, AMD Zen 5) at the rate of a 256-bit one, and no CPUID bit says which. vnni_macs_per_second is
// the yardstick of the small-batch matmul benchmarks (bench_kernels BM_DecodeQwen3Rows): how many
// VPDPBUSD of 512-bit vectors (64 multiply-adds each) a core retires a second.
#include <time.h>

#include "kernels/x86/avx512/avx512_common.h"
#include "kernels/x86/avx512/avx512_kernels.h"

namespace infer::kernels::avx512 {

// Internal linkage, as avx512_common.h explains.
namespace {

constexpr int kChains = 12;  // independent chains: more than latency × units on any of these CPUs
constexpr int kSteps = 16384;

double now_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Seconds for kSteps × kChains FMAs of one width (V: __m256 or __m512); the sum goes to `sink` so that
// the compiler keeps the work.
template <class V, V (*Fma)(V, V, V), V (*Set1)(float)>
double fma_seconds(float* sink) {
  V acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Set1(static_cast<float>(c));
  const V a = Set1(0.999f), b = Set1(1e-3f);
  const double start = now_seconds();
  for (int s = 0; s < kSteps; ++s) {
    for (int c = 0; c < kChains; ++c) acc[c] = Fma(acc[c], a, b);
  }
  const double seconds = now_seconds() - start;
  alignas(64) float lanes[sizeof(V) / sizeof(float)];
  V total = acc[0];
  for (int c = 1; c < kChains; ++c) total = Fma(total, a, acc[c]);
  __builtin_memcpy(lanes, &total, sizeof(V));
  *sink += lanes[0];
  return seconds;
}

// Seconds for 4 · kSteps × kChains VPDPBUSD; the sums go to `sink` so that the compiler keeps the work.
double vnni_seconds(int32_t* sink) {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  const double start = now_seconds();
  for (int s = 0; s < 4 * kSteps; ++s) {
    asm volatile("" : "+v"(a), "+v"(b));  // fresh operands every step: nothing is hoisted or folded
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  }
  const double seconds = now_seconds() - start;
  __m512i total = acc[0];
  for (int c = 1; c < kChains; ++c) total = _mm512_add_epi32(total, acc[c]);
  *sink += _mm512_reduce_add_epi32(total);
  return seconds;
}

__m256 fma256(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
__m256 set256(float v) { return _mm256_set1_ps(v); }
__m512 fma512(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
__m512 set512(float v) { return _mm512_set1_ps(v); }
}  // namespace

double fma512_time_ratio() {
  float sink = 0;
  double best256 = 1e9, best512 = 1e9;
  // Rounds alternate the widths; the first is a warm-up (frequency and power states settle), and the
  // fastest of the others stands, since a busy machine only ever adds time.
  for (int round = 0; round < 8; ++round) {
    const double t512 = fma_seconds<__m512, fma512, set512>(&sink);
    const double t256 = fma_seconds<__m256, fma256, set256>(&sink);
    if (round == 0) continue;
    best512 = t512 < best512 ? t512 : best512;
    best256 = t256 < best256 ? t256 : best256;
  }
  volatile float keep = sink;
  (void)keep;
  return best256 > 0 ? best512 / best256 : 2.0;
}

double vnni_macs_per_second() {
  int32_t sink = 0;
  double best = 1e9;
  // As above: a warm-up round, then the fastest of the others.
  for (int round = 0; round < 6; ++round) {
    const double t = vnni_seconds(&sink);
    if (round > 0 && t < best) best = t;
  }
  volatile int32_t keep = sink;
  (void)keep;
  return 64.0 * kChains * 4 * kSteps / best;
}

}  // namespace infer::kernels::avx512
