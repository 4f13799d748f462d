// AVX2 activation quantisers, bit-identical to the scalar references: the same f32 multiplies,
// round-to-nearest-even (vroundps ≡ lrintf in the default mode) and the same scale arithmetic.
#include <bit>
#include <cstring>

#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::avx2 {

namespace {
// Rounds 32 floats (already scaled) to nearest even and packs them as int8 in element order.
inline __m256i round_pack32(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return pack_i8(_mm256_cvtps_epi32(_mm256_round_ps(v0, kRound)), _mm256_cvtps_epi32(_mm256_round_ps(v1, kRound)),
                 _mm256_cvtps_epi32(_mm256_round_ps(v2, kRound)), _mm256_cvtps_epi32(_mm256_round_ps(v3, kRound)));
}
}  // namespace

namespace {
template <class Block>
void quantize_act_q8(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float* x = src + i * kQK0;
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 8 * k);
    const float amax = amax32(v);
    b[i].d = f16_to_f32(f32_to_f16(amax / 127));  // the value a Q8_0 block would hold
    const __m256 id = _mm256_set1_ps(amax != 0 ? 127.0f / amax : 0.0f);
    const __m256i q = round_pack32(_mm256_mul_ps(v[0], id), _mm256_mul_ps(v[1], id), _mm256_mul_ps(v[2], id),
                                   _mm256_mul_ps(v[3], id));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), q);
    if constexpr (requires { b[i].s; }) b[i].s = static_cast<float>(sum_i8(q));
  }
}
}  // namespace

void quantize_act_q8_0f(const float* src, void* dst, int64_t n) { quantize_act_q8<BlockQ8_0F>(src, dst, n); }

void quantize_act_q8_1f(const float* src, void* dst, int64_t n) { quantize_act_q8<BlockQ8_1F>(src, dst, n); }

void quantize_act_q8_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQKK; k += 8) m = _mm256_max_ps(m, abs8(_mm256_loadu_ps(x + k)));
    const float amax = hmax(m);
    if (amax == 0) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The reference keeps the first element of largest magnitude, with its sign: found 8 at a time, as
    // a scalar search was much of this function (perf, infer serve-bench at 8 sequences).
    int first = kQKK;
    const __m256 amax8 = _mm256_set1_ps(amax);
    for (int k = 0; k < kQKK; k += 8) {
      const int hits = _mm256_movemask_ps(_mm256_cmp_ps(abs8(_mm256_loadu_ps(x + k)), amax8, _CMP_EQ_OQ));
      if (hits != 0) {
        first = k + std::countr_zero(static_cast<unsigned>(hits));
        break;
      }
    }
    if (first == kQKK) {  // NaN in the block: let the reference decide what it means
      ref::quantize_q8_k(x, &b[i], kQKK);
      continue;
    }
    const float iscale = -127.0f / x[first];
    const __m256 s = _mm256_set1_ps(iscale);
    for (int k = 0; k < kQKK; k += 32) {
      // Codes can reach +128 only for −x[first]·(1+ε); the reference caps them at 127.
      __m256 v[4];
      for (int j = 0; j < 4; ++j) v[j] = _mm256_min_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * j), s), _mm256_set1_ps(127.0f));
      const __m256i q = round_pack32(v[0], v[1], v[2], v[3]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + k), q);
      // bsums of the two 16-code groups in this 32.
      const __m256i wide0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
      const __m256i wide1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
      const __m256i ones = _mm256_set1_epi16(1);
      const __m256i s0 = _mm256_madd_epi16(wide0, ones), s1 = _mm256_madd_epi16(wide1, ones);
      const __m256i h = _mm256_hadd_epi32(s0, s1);  // [s0 01,23 | s1 01,23 | s0 45,67 | s1 45,67]
      const __m256i h2 = _mm256_hadd_epi32(h, h);
      alignas(32) int32_t t[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(t), h2);
      b[i].bsums[k / 16] = static_cast<int16_t>(t[0] + t[4]);
      b[i].bsums[k / 16 + 1] = static_cast<int16_t>(t[1] + t[5]);
    }
    b[i].d = 1 / iscale;
  }
}

}  // namespace infer::kernels::avx2
