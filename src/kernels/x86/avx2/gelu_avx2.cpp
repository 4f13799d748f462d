// AVX2/F16C GELU and GeGLU: the table lookup of gelu.cpp eight values at a time (F16C rounds to f16
// as f32_to_f16 does, a gather reads the entries), bitwise the scalar path.
#include <immintrin.h>

#include "kernels/x86/avx2/ops_avx2.h"

namespace infer::kernels {
namespace {

// gelu(x) for 8 values: 0 at or below −10, x at or above 10, else table[f16(x)] widened.
inline __m256 gelu8(const uint16_t* table, __m256 x) {
  const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // 32-bit reads at table + 2·h (the table has one entry of padding); the low half is the entry
  const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), _mm256_cvtepu16_epi32(h), 2);
  const __m256i low = _mm256_shuffle_epi8(g, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                                              0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1));
  const __m128i packed = _mm256_castsi256_si128(_mm256_permute4x64_epi64(low, 0x08));
  __m256 y = _mm256_cvtph_ps(packed);
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-10.0f), _CMP_LE_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GE_OQ));
}

}  // namespace

void gelu_avx2(const uint16_t* table, const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, gelu8(table, _mm256_loadu_ps(x + i)));
  if (i < n) gelu_ref(x + i, out + i, n - i);
}

void geglu_avx2(const uint16_t* table, const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(gelu8(table, _mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  }
  if (i < n) geglu_ref(gate + i, up + i, out + i, n - i);
}

}  // namespace infer::kernels
