// Shared writer for Q4_K and Q5_K super-blocks: 8 sub-blocks of 32 with a 6-bit scale and min each.
// Internal to src/kernels.
#pragma once
#include <cstdint>

namespace infer::kernels::ref {

struct KScales {
  uint16_t d, dmin;  // f16 super-scales
  uint8_t sc[8], m[8];  // 6-bit sub-block scales and mins
};

// Quantises 256 floats to codes 0..nmax (15 for Q4_K, 31 for Q5_K) so that x ≈ d·sc·q − dmin·m.
// Each sub-block spans [min(0, lowest), highest]; the sub-block scales and mins are quantised to
// 6 bits against the largest (d = max_scale/63, dmin = max_min/63, §5.4) and the codes are rounded
// against the stored (f16, 6-bit) values, so the result is always a valid, self-consistent block.
KScales quantize_k_superblock(const float* x, int nmax, uint8_t codes[256]);

}  // namespace infer::kernels::ref
