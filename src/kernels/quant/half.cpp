// IEEE binary16 and bfloat16 ⇄ f32 conversions with ggml's exact rounding rules (spec §3, §8).
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/quant/quant.h"

namespace infer::kernels {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) {  // inf, or NaN made quiet with its payload kept (shifted into the f32 mantissa)
    return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  }
  if (exp == 0) {  // zero or subnormal: mant · 2^-24, exact in f32
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(v));
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7FFFFFFF;
  if (a > 0x7F800000) return sign | 0x7E00;   // any NaN → canonical quiet NaN, sign kept
  if (a >= 0x477FF000) return sign | 0x7C00;  // rounds to ≥ 65520 (ties go to the even inf): inf
  if (a < 0x38800000) {
    // Below the smallest normal half: adding 0.5 puts the value in a binade whose f32 ulp is 2^-24,
    // the half subnormal step, so the hardware's round-to-nearest-even does the rounding.
    const float r = std::bit_cast<float>(a) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(r) - 0x3F000000u));
  }
  // Normal: rebias the exponent (127 → 15) and round the 13 dropped bits to nearest even.
  const uint32_t odd = (a >> 13) & 1;
  const uint32_t r = a - 0x38000000u + 0xFFFu + odd;
  return static_cast<uint16_t>(sign | (r >> 13));
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 0x0040);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

}  // namespace infer::kernels
