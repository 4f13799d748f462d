// AVX2 SwiGLU with the vectorised exp (vec_exp_avx2.h).
#include <immintrin.h>

#include <cmath>

#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx2/vec_exp_avx2.h"

namespace infer::kernels {

void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp_avx2(_mm256_sub_ps(zero, g))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace infer::kernels
