// The activation quantisers of the block-format matmul: the CPU's rules (kernels::quantize_activation_row),
// element for element, as host/device functions and as a warp's share of a row (one 256-value chunk),
// so that the matmul's own quantise kernel and the kernels that produce a matmul's input (RMSNorm)
// write the same codes.
#pragma once
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "cuda/gpu_kernels.h"

namespace infer::cuda {

// Round to nearest, ties to even, as the CPU's nearest_int.
__host__ __device__ inline int round_even(float v) {
#ifdef __CUDA_ARCH__
  return __float2int_rn(v);
#else
  return int(std::nearbyint(v));
#endif
}

__host__ __device__ inline float to_half_and_back(float v) {
#ifdef __CUDA_ARCH__
  return __half2float(__float2half_rn(v));
#else
  return float(__half(v));  // cuda_fp16's host conversion rounds to nearest even
#endif
}

// Q8_K of 256 values: the value of largest magnitude (the first, on ties) sets iscale = −127 / max.
__host__ __device__ inline void q8_k_codes(const float* x, int n, float max, int8_t* q) {
  const float iscale = -127.0f / max;
  for (int j = 0; j < n; ++j) q[j] = int8_t(round_even(iscale * x[j]) < 127 ? round_even(iscale * x[j]) : 127);
}
__host__ __device__ inline float q8_k_scale(float max) { return max == 0.f ? 0.f : 1.0f / (-127.0f / max); }

// Q8_0 (the AVX2 rule): codes x·(127 / amax), scale amax / 127 through f16.
__host__ __device__ inline void q8_0_codes(const float* x, int n, float amax, int8_t* q) {
  const float id = amax != 0.f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < n; ++j) q[j] = int8_t(round_even(x[j] * id));
}

#ifdef __CUDACC__
// Chunk c (values 256c .. 256c+255) of a row of n_in values, by one warp: lane l quantises values
// 8l .. 8l+7 into `codes` (the row's n_in codes) and `scales` (its n_in / 32 scales: Q8_0 one a
// 32-block, Q8_K one a 256 in the first n_in / 256 places). Q8_K rows are whole chunks; Q8_0 rows
// end on a whole block.
__device__ inline void quantize_chunk(ActFormat f, const float* row, int64_t n_in, int64_t c, int lane, int8_t* codes,
                                      float* scales) {
  const int64_t k0 = c * 256 + 8 * lane;
  float v[8] = {};
  if (k0 < n_in) {
    const float4 a = *reinterpret_cast<const float4*>(row + k0), b = *reinterpret_cast<const float4*>(row + k0 + 4);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  }
  int8_t q[8] = {};
  if (f == ActFormat::Q8_K) {
    float amax = 0.f, max = 0.f;
    int at = 256;
    for (int j = 0; j < 8; ++j) {
      if (fabsf(v[j]) > amax) {
        amax = fabsf(v[j]);
        max = v[j];
        at = 8 * lane + j;
      }
    }
    for (int off = 16; off > 0; off /= 2) {
      const float o_amax = __shfl_xor_sync(0xffffffffu, amax, off), o_max = __shfl_xor_sync(0xffffffffu, max, off);
      const int o_at = __shfl_xor_sync(0xffffffffu, at, off);
      if (o_amax > amax || (o_amax == amax && o_at < at)) {
        amax = o_amax;
        max = o_max;
        at = o_at;
      }
    }
    if (amax != 0.f) q8_k_codes(v, 8, max, q);
    if (lane == 0) scales[c] = amax != 0.f ? q8_k_scale(max) : 0.f;
  } else {
    float amax = 0.f;
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(v[j]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    q8_0_codes(v, 8, amax, q);
    if (lane % 4 == 0 && k0 < n_in) scales[k0 / 32] = to_half_and_back(amax / 127);
  }
  if (k0 < n_in) {
    uint2 packed;
    memcpy(&packed, q, 8);
    *reinterpret_cast<uint2*>(codes + k0) = packed;
  }
}
#endif

}  // namespace infer::cuda
