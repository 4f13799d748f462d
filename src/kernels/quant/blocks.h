// Byte layouts of the block formats (spec/quant-formats.md §4–§5), shared by the reference and the
// AVX2 kernels. Internal to src/kernels. Every struct matches the file's packed record exactly.
#pragma once
#include <cstdint>

namespace infer::kernels {

inline constexpr int kQK0 = 32;   // elements per Q8_0 / Q4_0 / Q5_0 / Q5_1 block
inline constexpr int kQKK = 256;  // elements per K-quant super-block

struct BlockQ8_0 { uint16_t d; int8_t qs[kQK0]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK0 / 2]; };
// qh: bit k is the fifth bit (value 16) of element k, read as a little-endian u32 (§4.3).
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK0 / 2]; };
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[kQK0 / 2]; };
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[kQKK / 2]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[kQKK / 8]; uint8_t qs[kQKK / 2]; };
struct BlockQ6_K { uint8_t ql[kQKK / 2]; uint8_t qh[kQKK / 4]; int8_t scales[kQKK / 16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[kQKK]; int16_t bsums[kQKK / 16]; };
// Not a file format: the activation block of the AVX2 Q8_0/Q4_0/Q5_0/Q5_1 kernels, a Q8_0 block whose
// f16 scale was widened to f32 once at quantisation instead of once per weight row.
struct BlockQ8_0F { float d; int8_t qs[kQK0]; };
// Not a file format: BlockQ8_0F plus the sum of its codes (exact in f32), for Q5_1's min term; the
// role of llama.cpp's Q8_1 activations, whose s holds d·Σqs rounded to f16 instead.
struct BlockQ8_1F { float d; float s; int8_t qs[kQK0]; };

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292 && sizeof(BlockQ8_0F) == 36 && sizeof(BlockQ8_1F) == 40);

// Q5_0 / Q5_1 (§4.3): the 5-bit code of element k (0..31), low nibble from qs, fifth bit from qh.
inline int q5_code(const uint8_t* qs, const uint8_t* qh, int k) {
  const int nibble = k < kQK0 / 2 ? qs[k] & 0x0F : qs[k - kQK0 / 2] >> 4;
  return nibble | ((qh[k / 8] >> (k % 8)) & 1) << 4;
}

// The writers' inverse: stores the 5-bit codes q[0..31] into qs and qh.
inline void q5_pack(const uint8_t q[kQK0], uint8_t* qs, uint8_t* qh) {
  for (int j = 0; j < 4; ++j) qh[j] = 0;
  for (int j = 0; j < kQK0 / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | (q[j + 16] & 0x0F) << 4);
  for (int k = 0; k < kQK0; ++k) qh[k / 8] = static_cast<uint8_t>(qh[k / 8] | ((q[k] >> 4) & 1) << (k % 8));
}

// The 12-byte packed 6-bit scales and mins of Q4_K / Q5_K (§5.1): sub-block j's scale and min.
inline void unpack_k_scales(const uint8_t* s, uint8_t sc[8], uint8_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 0x3F;
    m[j] = s[j + 4] & 0x3F;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    m[j] = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

inline void pack_k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 0x3F) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 0x3F) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4));
  }
}

}  // namespace infer::kernels
