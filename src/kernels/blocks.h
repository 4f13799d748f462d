// Byte layouts of the block formats (spec/quant-formats.md §4–§5), shared by the reference and the
// AVX2 kernels. Internal to src/kernels. Every struct matches the file's packed record exactly.
#pragma once
#include <cstdint>

namespace infer::kernels {

inline constexpr int kQK0 = 32;   // elements per Q8_0 / Q4_0 block
inline constexpr int kQKK = 256;  // elements per K-quant super-block

struct BlockQ8_0 { uint16_t d; int8_t qs[kQK0]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK0 / 2]; };
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[kQKK / 2]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[kQKK / 8]; uint8_t qs[kQKK / 2]; };
struct BlockQ6_K { uint8_t ql[kQKK / 2]; uint8_t qh[kQKK / 4]; int8_t scales[kQKK / 16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[kQKK]; int16_t bsums[kQKK / 16]; };
// Not a file format: the activation block of the AVX2 Q8_0/Q4_0 kernels, a Q8_0 block whose f16
// scale was widened to f32 once at quantisation instead of once per weight row.
struct BlockQ8_0F { float d; int8_t qs[kQK0]; };

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292 && sizeof(BlockQ8_0F) == 36);

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
