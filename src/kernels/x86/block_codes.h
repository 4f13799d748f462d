// The codes of the 4- and 5-bit 32-element block formats as one vector of 32 bytes in element order,
// for the AVX2 and the AVX-512 kernels alike. Internal linkage: files compiled for different CPUs
// must share no instantiation (avx512_common.h explains why). Internal to src/kernels.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace infer::kernels {
namespace {

// The 16 bytes qs as 32 nibbles: bytes 0..15 the low nibbles (elements 0..15), bytes 16..31 the high
// ones (elements 16..31).
inline __m256i nibbles(const uint8_t* qs) {
  // Both 128-bit lanes get the 16 bytes; the high lane is shifted down to its high nibbles.
  const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi32(q, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
}

// Byte k: 0x10 where bit k of the little-endian u32 qh is set (Q5_0/Q5_1's fifth bits), else 0.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  // Byte k takes qh byte k/8 (the shuffle stays within a 128-bit lane; each lane holds all four).
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Q5_0/Q5_1: the unsigned codes u = nibble | fifth bit·16, 0..31.
template <class Block>
inline __m256i q5_codes(const Block& b) {
  return _mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh));
}

}  // namespace
}  // namespace infer::kernels
