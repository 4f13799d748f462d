// Q8_K (spec §5.7): the activation format of K-quant dot products. f32 scale, 256 int8 codes and
// sums of each 16 codes. The quantiser is ggml's reference, which every x86 path uses too.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

void dequantize_q8_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    for (int j = 0; j < kQKK; ++j) dst[i * kQKK + j] = b[i].d * b[i].qs[j];
  }
}

void quantize_q8_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    float amax = 0, max = 0;
    for (int j = 0; j < kQKK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0) {  // ggml leaves bsums unwritten here; we write zeros
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQKK; ++j) {
      b[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    }
    for (int g = 0; g < kQKK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b[i].qs[16 * g + j];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
    b[i].d = 1 / iscale;
  }
}

}  // namespace infer::kernels::ref
