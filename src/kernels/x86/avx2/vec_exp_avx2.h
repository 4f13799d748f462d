// Vectorised expf for the *_avx2.cpp files only (needs -mavx2 -mfma). Classic range reduction
// x = n·ln2 + r with a two-part ln2, a degree-6 polynomial for e^r on |r| <= ln2/2, and 2^n built in
// the exponent bits. Relative error about 2 ulp over the clamped input range [-87.3, 88.7].
#pragma once
#include <immintrin.h>

#include "kernels/ops/exp_constants.h"

namespace infer::kernels {

inline __m256 exp_avx2(__m256 x) {
  using namespace exp_constants;
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kLowest)), _mm256_set1_ps(kHighest));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 y = _mm256_fmadd_ps(p, r2, r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.f));
  // 2^n: n in [-126, 128] after the clamp; n = 128 only for x near 88.7 where 2^127·2 is handled by
  // splitting the power in two halves.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256i rest = _mm256_sub_epi32(ni, half);
  const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, _mm256_set1_epi32(127)), 23));
  return _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
}

}  // namespace infer::kernels
