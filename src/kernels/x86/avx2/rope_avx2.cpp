// AVX2 rotation with precomputed angles. NeoX pairs are two contiguous halves; normal pairs are
// adjacent elements, de-interleaved with shuffles. Products are not fused, so the result equals the
// scalar reference bit for bit.
#include <immintrin.h>

#include "kernels/x86/avx2/ops_avx2.h"

namespace infer::kernels {

void rope_apply_avx2(float* head, const float* cos, const float* sin, const RopeParams& p) {
  const int half = p.n_rot / 2;
  int i = 0;
  if (p.neox) {
    for (; i + 8 <= half; i += 8) {
      const __m256 x0 = _mm256_loadu_ps(head + i), x1 = _mm256_loadu_ps(head + i + half);
      const __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
      _mm256_storeu_ps(head + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
      _mm256_storeu_ps(head + i + half, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
    }
    for (; i < half; ++i) {
      const float x0 = head[i], x1 = head[i + half];
      head[i] = x0 * cos[i] - x1 * sin[i];
      head[i + half] = x0 * sin[i] + x1 * cos[i];
    }
    return;
  }
  for (; i + 4 <= half; i += 4) {
    // 8 floats = 4 adjacent pairs; duplicate each angle onto its pair's two lanes.
    const __m256 v = _mm256_loadu_ps(head + 2 * i);
    const __m128 c4 = _mm_loadu_ps(cos + i), s4 = _mm_loadu_ps(sin + i);
    const __m256 c = _mm256_set_m128(_mm_unpackhi_ps(c4, c4), _mm_unpacklo_ps(c4, c4));
    const __m256 s = _mm256_set_m128(_mm_unpackhi_ps(s4, s4), _mm_unpacklo_ps(s4, s4));
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // (x1, x0) in each pair
    // even lanes: x0·c − x1·s; odd lanes: x1·c + x0·s
    const __m256 vc = _mm256_mul_ps(v, c);
    const __m256 ws = _mm256_mul_ps(swapped, s);
    _mm256_storeu_ps(head + 2 * i, _mm256_addsub_ps(vc, ws));
  }
  for (; i < half; ++i) {
    const float x0 = head[2 * i], x1 = head[2 * i + 1];
    head[2 * i] = x0 * cos[i] - x1 * sin[i];
    head[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
  }
}

}  // namespace infer::kernels
