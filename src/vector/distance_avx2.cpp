// AVX2/FMA/POPCNT versions of the Q8 and F32 dot products and the BIN Hamming distance behind
// distance() (encoded_vectors.cpp). Compiled with AVX2 flags (CMakeLists.txt) and reached only through
// the run-time check in encoded_vectors.cpp; the scalar loops there are the reference, and
// tests/vector/test_quant.cpp holds the two together.
#include <immintrin.h>

#include <cstring>

#include "vector/distance_simd.h"

namespace infer::vector::avx2 {

namespace {
int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}
}  // namespace

int32_t dot_i8(const int8_t* a, const int8_t* b, size_t dim) {
  // maddubs multiplies unsigned by signed bytes: feed it |a| and b carrying a's sign. Stored components
  // are within ±127, so a pair sum (at most 2·127·127) never saturates the int16 lanes.
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 64 <= dim; i += 64) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i + 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i + 32));
    const __m256i p0 = _mm256_maddubs_epi16(_mm256_sign_epi8(a0, a0), _mm256_sign_epi8(b0, a0));
    const __m256i p1 = _mm256_maddubs_epi16(_mm256_sign_epi8(a1, a1), _mm256_sign_epi8(b1, a1));
    acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(p0, ones));
    acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(p1, ones));
  }
  for (; i + 32 <= dim; i += 32) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i p0 = _mm256_maddubs_epi16(_mm256_sign_epi8(a0, a0), _mm256_sign_epi8(b0, a0));
    acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(p0, ones));
  }
  int32_t s = hsum_i32(_mm256_add_epi32(acc0, acc1));
  for (; i < dim; ++i) s += int32_t(a[i]) * int32_t(b[i]);
  return s;
}

float dot_f32(const float* a, const float* b, size_t dim) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= dim; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  const __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float r = _mm_cvtss_f32(s);
  for (; i < dim; ++i) r += a[i] * b[i];
  return r;
}

// Every AVX2 CPU has POPCNT; the flag is set here so that std::popcount-style code becomes one instruction.
__attribute__((target("popcnt"))) uint32_t hamming(const uint8_t* a, const uint8_t* b, size_t n) {
  size_t i = 0;
  uint64_t differ = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    differ += static_cast<uint64_t>(_mm_popcnt_u64(x ^ y));
  }
  for (; i < n; ++i) differ += static_cast<uint64_t>(_mm_popcnt_u32(static_cast<uint8_t>(a[i] ^ b[i])));
  return static_cast<uint32_t>(differ);
}

}  // namespace infer::vector::avx2
