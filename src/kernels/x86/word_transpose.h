// The 8×8 transpose of 32-bit words that the block formats' batch tiles (AVX2 and AVX-512) use to lay 8
// weight rows' block codes out one row per lane. Internal linkage: each including file compiles its
// own copy with its own instruction-set flags (avx512_common.h explains why that matters).
#pragma once
#include <immintrin.h>

namespace infer::kernels {
namespace {

// r[i]: the 8 code words of row i; out[k]: word k of rows 0..7.
inline void transpose_words8(const __m256i (&r)[8], __m256i (&out)[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    out[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
    out[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
  }
}

}  // namespace
}  // namespace infer::kernels
