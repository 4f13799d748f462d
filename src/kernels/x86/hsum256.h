// Fixed-order horizontal sums of 256-bit float vectors. Every float kernel ends a row with hsum, so the
// order never depends on batching (invariant 7). Internal linkage: AVX2 and AVX-512 files both include
// this, each keeping its own copy compiled for its instruction set (avx512_common.h explains why).
#pragma once
#include <immintrin.h>

namespace infer::kernels {
namespace {

// (hi128 + lo128), then pairs, then the last two.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// hsum of a, b, c and d (lanes 0..3 of the result), each by hsum's own order of adds:
// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
  // [x(s0+s2), x(s1+s3), y(s0+s2), y(s1+s3)] with (x, y) = (a, c) in the low half, (b, d) in the high
  const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xEE));
  const __m256 h = _mm256_hadd_ps(t, t);  // lanes 0, 1: a, c; lanes 4, 5: b, d
  return _mm_unpacklo_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));  // a, b, c, d
}

}  // namespace
}  // namespace infer::kernels
