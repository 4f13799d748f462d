// Q6_K (spec §5.6): 6-bit codes split into ql (low 4 bits) and qh (high 2 bits), an int8 scale per
// 16 elements and an f16 super-scale stored last.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

namespace {
// Signed code −32..31 of element e.
int q6_k_code(const BlockQ6_K& b, int e) {
  const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
  const int low4 = (b.ql[64 * h + 32 * (g % 2) + l] >> (4 * (g / 2))) & 0x0F;
  const int high2 = (b.qh[32 * h + l] >> (2 * g)) & 3;
  return (low4 | (high2 << 4)) - 32;
}
}  // namespace

void dequantize_q6_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int e = 0; e < kQKK; ++e) {
      const float d1 = d * static_cast<float>(b[i].scales[e / 16]);
      dst[i * kQKK + e] = d1 * static_cast<float>(q6_k_code(b[i], e));
    }
  }
}

// Per group of 16: the scale maps the signed element of largest magnitude to −32; the group scales
// are then quantised to int8 against the largest one (d = −max_scale/128), as ggml's writer does.
void quantize_q6_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < 16; ++g) {
      float amax = 0, max = 0;
      for (int j = 0; j < 16; ++j) {
        if (std::fabs(x[16 * g + j]) > amax) {
          amax = std::fabs(x[16 * g + j]);
          max = x[16 * g + j];
        }
      }
      scales[g] = max / -32;
      if (std::fabs(scales[g]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[g]);
        max_scale = scales[g];
      }
    }
    std::memset(&b[i], 0, sizeof(BlockQ6_K));
    if (max_abs_scale < 1e-15f) continue;  // all (near) zero: an all-zero block
    const float iscale = -128.0f / max_scale;
    b[i].d = f32_to_f16(1 / iscale);
    const float d = f16_to_f32(b[i].d);
    for (int g = 0; g < 16; ++g) b[i].scales[g] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[g])));
    for (int e = 0; e < kQKK; ++e) {
      const float dl = d * b[i].scales[e / 16];
      const int q = dl != 0 ? std::clamp(nearest_int(x[e] / dl), -32, 31) + 32 : 32;
      const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
      b[i].ql[64 * h + 32 * (g % 2) + l] |= static_cast<uint8_t>((q & 0x0F) << (4 * (g / 2)));
      b[i].qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * g));
    }
  }
}

float dot_q6_k(const void* w, const void* act, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  float acc = 0;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int32_t sumi = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t isum = 0;
      for (int l = 0; l < 16; ++l) isum += q6_k_code(x[i], 16 * g + l) * y[i].qs[16 * g + l];
      sumi += x[i].scales[g] * isum;
    }
    acc += (f16_to_f32(x[i].d) * y[i].d) * static_cast<float>(sumi);
  }
  return acc;
}

}  // namespace infer::kernels::ref
