// F16C conversion of one K and V row; the hardware rounds to nearest even like f32_to_f16.
#include <immintrin.h>

#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/quant/quant.h"

namespace infer::kernels {

void kv_store_avx2(const float* k, const float* v, uint16_t* kd, uint16_t* vd, int kv_dim) {
  int i = 0;
  for (; i + 8 <= kv_dim; i += 8) {
    const __m128i kh = _mm256_cvtps_ph(_mm256_loadu_ps(k + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i vh = _mm256_cvtps_ph(_mm256_loadu_ps(v + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(kd + i), kh);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(vd + i), vh);
  }
  for (; i < kv_dim; ++i) {
    kd[i] = f32_to_f16(k[i]);
    vd[i] = f32_to_f16(v[i]);
  }
}

}  // namespace infer::kernels
