// One K and V row stored as F16 (F16C, which rounds to nearest even like f32_to_f16) or as Q8_0 or
// Q4_0 blocks bit for bit those of the reference quantisers (quantize_row): the same scale arithmetic,
// and Q8_0's roundf ties away from zero rebuilt from a truncation (perf over `infer serve-bench --kv-type q8_0`
// at 8 sequences found the scalar quantiser's roundf and fmaxf calls a large share of attention).
#include <immintrin.h>

#include "kernels/x86/avx2/avx2_common.h"
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

namespace {

// roundf of each lane: truncate, then step away from zero where the dropped part is at least a half
// (v − trunc(v) is exact).
inline __m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.f));
  const __m256 half_or_more = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), _mm256_sub_ps(v, t)),
                                            _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm256_add_ps(t, _mm256_and_ps(half_or_more, _mm256_or_ps(sign, _mm256_set1_ps(1.f))));
}

}  // namespace

void kv_store_q8_0_row_avx2(const float* x, uint16_t* dst, int n) {
  for (int b = 0; b < n / 32; ++b, x += 32, dst += kv_block_halves(KvType::Q8_0)) {
    __m256 v[4];
    for (int c = 0; c < 4; ++c) v[c] = _mm256_loadu_ps(x + 8 * c);
    const float amax = avx2::amax32(v);
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    dst[0] = f32_to_f16(d);
    __m256i i[4];
    for (int c = 0; c < 4; ++c) i[c] = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v[c], _mm256_set1_ps(id))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 1), avx2::pack_i8(i[0], i[1], i[2], i[3]));
  }
}

void kv_store_q4_0_row_avx2(const float* x, uint16_t* dst, int n) {
  for (int b = 0; b < n / 32; ++b, x += 32, dst += kv_block_halves(KvType::Q4_0)) {
    __m256 v[4];
    for (int c = 0; c < 4; ++c) v[c] = _mm256_loadu_ps(x + 8 * c);
    // The reference's scale comes from the first element of the largest magnitude, with its sign.
    // (An all-zero block keeps max +0, as the reference's.)
    const float amax = avx2::amax32(v);
    float max = 0.f;
    if (amax > 0.f) {
      uint32_t hits = 0;
      for (int c = 0; c < 4; ++c) {
        hits |= uint32_t(_mm256_movemask_ps(_mm256_cmp_ps(avx2::abs8(v[c]), _mm256_set1_ps(amax), _CMP_EQ_OQ))) << (8 * c);
      }
      max = x[__builtin_ctz(hits)];
    }
    const float d = max / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    dst[0] = f32_to_f16(d);
    // int(x · id + 8.5), at most 15: x · id + 8.5 is at least 0.5, so truncation is the reference's cast.
    __m256i i[4];
    for (int c = 0; c < 4; ++c) {
      const __m256 t = _mm256_add_ps(_mm256_mul_ps(v[c], _mm256_set1_ps(id)), _mm256_set1_ps(8.5f));
      i[c] = _mm256_min_epi32(_mm256_cvttps_epi32(t), _mm256_set1_epi32(15));
    }
    const __m256i codes = avx2::pack_i8(i[0], i[1], i[2], i[3]);  // elements 0..31, one a byte
    // byte j: element j in its low nibble, j + 16 in its high one
    const __m128i packed = _mm_or_si128(_mm256_castsi256_si128(codes), _mm_slli_epi16(_mm256_extracti128_si256(codes, 1), 4));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 1), packed);
  }
}

}  // namespace infer::kernels
