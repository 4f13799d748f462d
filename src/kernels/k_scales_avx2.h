// The Q4_K/Q5_K super-block scale unpacking shared by the AVX2 and AVX-512 kernels. Include only in
// files compiled with AVX2.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace infer::kernels::avx2 {
// Internal linkage on purpose: this header is compiled into files with different instruction sets
// (AVX2, AVX-512), and one shared inline definition could run AVX-512 code on an AVX2-only CPU.
namespace {

// The 6-bit scales and mins of a super-block (§5.1), unpacked with 32-bit word arithmetic.
struct KScaleVectors {
  __m256i scales;  // int16 sc[0..7], the same in both 128-bit lanes
  __m256i mins;    // int16 m[g / 2] for the 16 bsums groups g
};

// `s` points at the 12 scale bytes of a block; the 4 bytes after them (the block's codes) are read
// too and ignored. Works on the three 32-bit words w0..w2: sc[0..3] = w0 & 0x3F.., m[0..3] = w1 & 0x3F..,
// sc[4..7] = (w2 & 0x0F..) | top bits of w0, m[4..7] = (w2 >> 4 & 0x0F..) | top bits of w1.
inline KScaleVectors k_scale_vectors(const uint8_t* s) {
  const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i low6 = _mm_and_si128(w, _mm_set1_epi8(0x3F));                 // [sc03, m03, ..]
  const __m128i top2 = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w, 6), _mm_set1_epi8(0x03)), 4);
  const __m128i w2 = _mm_shuffle_epi32(w, _MM_SHUFFLE(2, 2, 2, 2));
  const __m128i low4 = _mm_and_si128(_mm_srlv_epi32(w2, _mm_setr_epi32(0, 4, 0, 0)), _mm_set1_epi8(0x0F));
  const __m128i high = _mm_or_si128(low4, top2);                               // [sc47, m47, ..]
  const __m128i bytes = _mm_unpacklo_epi32(low6, high);                        // sc0..7, m0..7
  const __m128i mins_pairs = _mm_shuffle_epi8(bytes, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
  return {_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes)), _mm256_cvtepu8_epi16(mins_pairs)};
}

}  // namespace
}  // namespace infer::kernels::avx2
