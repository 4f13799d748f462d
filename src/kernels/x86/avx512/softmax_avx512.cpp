// AVX-512 softmax, bitwise softmax_avx2 (softmax_avx2.cpp): exp_avx2's operations lane for lane, 16
// lanes wide, and the f64 sum in the AVX2 version's order (two 4-lane sums over the 8-element steps,
// here the low and high halves of one 8-lane vector), so a row's probabilities do not depend on which
// of the two a machine runs. Defines no weak symbols: see avx512_common.h.
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* operands): a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>

#include "kernels/ops/exp_constants.h"
#include "kernels/x86/avx512/ops_avx512.h"

namespace infer::kernels {

namespace {
__m512 exp16(__m512 x) {
  using namespace exp_constants;
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kLowest)), _mm512_set1_ps(kHighest));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  const __m512 r2 = _mm512_mul_ps(r, r);
  __m512 y = _mm512_fmadd_ps(p, r2, r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.f));
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i half = _mm512_srai_epi32(ni, 1);
  const __m512i rest = _mm512_sub_epi32(ni, half);
  const __m512 p1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(half, _mm512_set1_epi32(127)), 23));
  const __m512 p2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(rest, _mm512_set1_epi32(127)), 23));
  return _mm512_mul_ps(_mm512_mul_ps(y, p1), p2);
}

// Elements 0..7 of v as doubles.
__m512d low8_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
}  // namespace

void softmax_avx512(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  int64_t i = 0;
  if (n >= 16) {
    __m512 m = _mm512_loadu_ps(x);
    for (i = 16; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, m);
    for (float l : lanes) max = l > max ? l : max;
  }
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;

  const __m512 mv = _mm512_set1_ps(max);
  __m512d acc = _mm512_setzero_pd();  // lanes 0-3 and 4-7: the AVX2 version's two sums
  i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_pd(acc, low8_pd(e));
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  if (i + 8 <= n) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(0xFF, x + i), mv));
    _mm512_mask_storeu_ps(x + i, 0xFF, e);
    acc = _mm512_add_pd(acc, low8_pd(e));
    i += 8;
  }
  alignas(32) double dl[4];
  _mm256_store_pd(dl, _mm256_add_pd(_mm512_castpd512_pd256(acc), _mm512_extractf64x4_pd(acc, 1)));
  double sum = (dl[0] + dl[1]) + (dl[2] + dl[3]);
  for (; i < n; ++i) {
    x[i] = expf(x[i] - max);  // std::exp(float), without its inline wrapper
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  const __m512 iv = _mm512_set1_ps(inv);
  i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), iv));
  for (; i < n; ++i) x[i] *= inv;
}

}  // namespace infer::kernels
