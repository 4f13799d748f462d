// The sub-block scale/min search shared by the Q4_K and Q5_K writers.
#include "kernels/quant/k_quantize.h"

#include <algorithm>

#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

KScales quantize_k_superblock(const float* x, int nmax, uint8_t codes[256]) {
  float scale[8], min[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float lo = 0, hi = x[32 * j];
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, x[32 * j + l]);
      hi = std::max(hi, x[32 * j + l]);
    }
    scale[j] = std::max(0.0f, (hi - lo) / nmax);
    min[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  KScales ks{};
  const float inv_scale = max_scale > 0 ? 63 / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63 / max_min : 0.0f;
  for (int j = 0; j < 8; ++j) {
    ks.sc[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scale[j])));
    ks.m[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * min[j])));
  }
  ks.d = f32_to_f16(max_scale / 63);
  ks.dmin = f32_to_f16(max_min / 63);
  const float d = f16_to_f32(ks.d), dmin = f16_to_f32(ks.dmin);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * ks.sc[j];
    const float ml = dmin * ks.m[j];
    for (int l = 0; l < 32; ++l) {
      const int q = dl != 0 ? nearest_int((x[32 * j + l] + ml) / dl) : 0;
      codes[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, nmax));
    }
  }
  return ks;
}

}  // namespace infer::kernels::ref
