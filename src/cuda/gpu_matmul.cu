// The GPU matmul, y = x · Wᵀ, for every weight layout the backend keeps: F32/F16/BF16 rows against
// float activations, and Q8_0, Q4_K, Q5_K, Q6_K blocks against int8 activations (integer sums, as on
// the CPU). One warp per output and a fixed split of each row over its lanes, so an output's arithmetic
// does not depend on how many rows the batch has or where this one sits in it (invariant 7); each
// weight load serves a group of activation rows (1, kSmallRowGroup or kLargeRowGroup).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <stdexcept>

#include "cuda/act_quant.cuh"
#include "cuda/block_layout.h"
#include "cuda/check.h"
#include "cuda/gpu_kernels.h"

namespace infer::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kMatmulWarps = 8;  // outputs per block
// Activation rows per block: each weight load serves all of them. One row takes 1, small batches 8,
// large ones (prefill) 32, so that the weights are read a quarter as often; a row's arithmetic is the same.
constexpr int kSmallRowGroup = 8, kLargeRowGroup = 32;
constexpr int kUnits = 4;  // 16-byte weight chunks in flight per lane (float rows)

// The matrices one launch computes (q, k and v; gate and up: same input, same layout): block b of
// the grid serves matrix i when blocks[i] <= b < blocks[i + 1].
constexpr int kMaxTargets = 3;
struct MatmulTarget {
  const uint8_t* data;
  int64_t n_out, row_bytes;
  float* y;
  int64_t ys;
};
struct MatmulTargets {
  MatmulTarget t[kMaxTargets];
  int blocks[kMaxTargets + 1];
  int count;
};

// This warp's matrix and output row, or false past the matrix's last row.
__device__ inline bool find_output(const MatmulTargets& ts, const MatmulTarget*& tg, int64_t& o) {
  int i = 0;
  while (i + 1 < ts.count && int(blockIdx.x) >= ts.blocks[i + 1]) ++i;
  tg = &ts.t[i];
  o = int64_t(int(blockIdx.x) - ts.blocks[i]) * kMatmulWarps + threadIdx.x / kWarp;
  return o < tg->n_out;
}

// 8 activations at xr (16-byte aligned: the launchers check the rows) as two 16-byte loads.
__device__ inline void load_x8(const float* xr, float* x) {
  const float4 a = *reinterpret_cast<const float4*>(xr), b = *reinterpret_cast<const float4*>(xr + 4);
  x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w;
  x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
}

// Weights as floats: V elements from one 16-byte load (vector path) or one element (scalar path).
template <typename T> struct Elem;
template <> struct Elem<float> {
  __device__ static float get(const float* p) { return *p; }
  __device__ static void get16(const float* p, float* o) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    o[0] = v.x; o[1] = v.y; o[2] = v.z; o[3] = v.w;
  }
};
template <> struct Elem<__half> {
  __device__ static float get(const __half* p) { return __half2float(*p); }
  __device__ static void get16(const __half* p, float* o) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      o[2 * i] = f.x;
      o[2 * i + 1] = f.y;
    }
  }
};
template <> struct Elem<__nv_bfloat16> {
  __device__ static float get(const __nv_bfloat16* p) { return __bfloat162float(*p); }
  __device__ static void get16(const __nv_bfloat16* p, float* o) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      o[2 * i] = f.x;
      o[2 * i + 1] = f.y;
    }
  }
};

// One warp per output o, kRowGroup rows per block row. Lane l takes the 16-byte chunks l, l+32, ...
// (Vec) or the elements l, l+32, ... (scalar: rows not 16-byte aligned), then the butterfly sum.
template <typename T, bool Vec, int kRowGroup>
__global__ void matmul_kernel(MatmulTargets ts, int64_t n_in, const float* __restrict__ x, int64_t xs, int rows) {
  const int lane = threadIdx.x % kWarp;
  const MatmulTarget* tg;
  int64_t o;
  if (!find_output(ts, tg, o)) return;  // whole warps only
  float* __restrict__ y = tg->y;
  const int64_t ys = tg->ys;
  const int r0 = blockIdx.y * kRowGroup;
  const int nr = min(kRowGroup, rows - r0);
  const T* wr = reinterpret_cast<const T*>(tg->data + o * tg->row_bytes);
  const float* x0 = x + int64_t(r0) * xs;
  float acc[kRowGroup];
#pragma unroll
  for (int r = 0; r < kRowGroup; ++r) acc[r] = 0.f;
  if constexpr (Vec) {
    constexpr int V = 16 / sizeof(T);
    const int64_t n_vec = n_in / V;
    for (int64_t c0 = lane; c0 < n_vec; c0 += kUnits * kWarp) {
      float wv[kUnits][V];
#pragma unroll
      for (int i = 0; i < kUnits; ++i) {
        if (c0 + i * kWarp < n_vec) Elem<T>::get16(wr + (c0 + i * kWarp) * V, wv[i]);
      }
#pragma unroll
      for (int i = 0; i < kUnits; ++i) {
        const int64_t c = c0 + i * kWarp;
        if (c >= n_vec) continue;
#pragma unroll
        for (int r = 0; r < kRowGroup; ++r) {
          if (r < nr) {
            const float* xr = x0 + int64_t(r) * xs + c * V;
            float xv[8];
            if constexpr (V == 8) {
              load_x8(xr, xv);
            } else {
              const float4 q = *reinterpret_cast<const float4*>(xr);
              xv[0] = q.x; xv[1] = q.y; xv[2] = q.z; xv[3] = q.w;
            }
            float a = acc[r];
#pragma unroll
            for (int j = 0; j < V; ++j) a = fmaf(wv[i][j], xv[j], a);
            acc[r] = a;
          }
        }
      }
    }
  } else {
    for (int64_t c = lane; c < n_in; c += kWarp) {
      const float wv = Elem<T>::get(wr + c);
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r) {
        if (r < nr) acc[r] = fmaf(wv, x0[int64_t(r) * xs + c], acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowGroup; ++r) {
    float a = acc[r];
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) a += __shfl_xor_sync(0xffffffffu, a, off);
    if (lane == 0 && r < nr) y[int64_t(r0 + r) * ys + o] = a;
  }
}

// ---- block formats: integer dot products against int8 activations ----
// The activations of a block-format matmul are quantised first, per row, as the CPU quantises them for
// the same weight type (Q8_K for the K-quants, llama.cpp's AVX2 Q8_0 rule for Q8_0), so that each unit
// of weights meets its activations in integer sums (dp4a); only the per-unit scales are floats. A lane
// decodes its share of a unit once (Lane) and reuses it for every activation row of the block.
// Rows are laid out (gpu_row_bytes, to_gpu_row) so that each lane's codes are aligned loads: Q4_K and
// Q5_K as stored; Q6_K blocks padded from 210 to 224 bytes; Q8_0 rows as all their codes, then all
// their f16 scales. Everything here also runs on the host (tests emulate a warp with it).

__host__ __device__ inline float half_to_float(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1Fu) {
    bits = sign | 0x7F800000u | (man << 13);  // inf, nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    uint32_t m = man;
    do {
      ++e;
      m <<= 1;
    } while ((m & 0x400u) == 0);
    bits = sign | (uint32_t(112 - e) << 23) | ((m & 0x3FFu) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
#endif
}

// c + the sum of the four products of a's and b's signed bytes
__host__ __device__ inline int dp4a(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
  return __dp4a(int(a), int(b), c);
#else
  for (int i = 0; i < 4; ++i) c += int(int8_t(uint8_t(a >> (8 * i)))) * int(int8_t(uint8_t(b >> (8 * i))));
  return c;
#endif
}

// a − b in each of the four bytes, wrapping
__host__ __device__ inline uint32_t sub_bytes(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __vsub4(a, b);
#else
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= uint32_t(uint8_t(uint8_t(a >> (8 * i)) - uint8_t(b >> (8 * i)))) << (8 * i);
  return r;
#endif
}

__host__ __device__ inline uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__host__ __device__ inline uint32_t load_u32(const void* p) { return *reinterpret_cast<const uint32_t*>(p); }
__host__ __device__ inline uint2 load_u64(const void* p) { return *reinterpret_cast<const uint2*>(p); }
__host__ __device__ inline uint4 load_u128(const void* p) { return *reinterpret_cast<const uint4*>(p); }

// The 6-bit scales and mins of sub-blocks 2g and 2g + 1 (a lane's pair) from a K-quant's 12 scale bytes
// (three words), both at once and without branches: bytes 2(g & 1) and 2(g & 1) + 1 of each word hold
// them, as their low six bits (g < 2) or as high nibbles with two bits from the first two words.
__host__ __device__ inline void k_scale_min_pair(uint32_t w0, uint32_t w1, uint32_t w2, int g, int sc[2], int m[2]) {
  const int shift = 16 * (g & 1);
  const uint32_t a = (w0 >> shift) & 0xFFFFu, b = (w1 >> shift) & 0xFFFFu, c = (w2 >> shift) & 0xFFFFu;
  const uint32_t scales = g < 2 ? a & 0x3F3Fu : (c & 0x0F0Fu) | ((a >> 2) & 0x3030u);
  const uint32_t mins = g < 2 ? b & 0x3F3Fu : ((c >> 4) & 0x0F0Fu) | ((b >> 2) & 0x3030u);
  sc[0] = int(scales & 0xFFu);
  sc[1] = int(scales >> 8);
  m[0] = int(mins & 0xFFu);
  m[1] = int(mins >> 8);
}

constexpr uint32_t kOnes = 0x01010101u;

// Activation rows as the kernels read them: n_in int8 codes a row, and n_in / 32 float scales a row
// (Q8_0: one per 32-block; Q8_K: one per 256, in the first n_in / 256 places).
struct ActRows {
  const int8_t* codes;
  const float* scales;
  int64_t n_in;
  __host__ __device__ const int8_t* row(int r) const { return codes + int64_t(r) * n_in; }
  __host__ __device__ const float* row_scales(int r) const { return scales + int64_t(r) * (n_in / 32); }
};

// Q4_K: 16 lanes a super-block; lane t holds 8 codes of sub-block 2g and 8 of 2g+1 (g = t / 4).
struct Q4_K {
  static constexpr int kLanes = 16, kUnitElems = 256, kUnitBytes = 144;
  static int64_t row_bytes(int64_t n_in) { return n_in / 256 * kUnitBytes; }
  struct Lane {
    uint32_t lo[2], hi[2];
    int sc[2], m[2];
    float d, dmin;
  };
  // A lane's bytes as loaded (fetch), then decoded (decode): loads of several units go out together
  // while only their raw words take registers.
  struct Raw {
    uint2 q;
    uint4 head;  // d and dmin, then the 12 scale bytes: one 16-byte load (units are 16-byte aligned)
  };
  __host__ __device__ static Raw fetch(const uint8_t* row, int64_t u, int t, int64_t) {
    const uint8_t* b = row + u * kUnitBytes;
    const int g = t / 4, l0 = (t % 4) * 8;
    return Raw{load_u64(b + 16 + 32 * g + l0), load_u128(b)};
  }
  __host__ __device__ static Lane decode(const Raw& r, int t) {
    Lane w;
    w.lo[0] = r.q.x & 0x0F0F0F0Fu;
    w.lo[1] = r.q.y & 0x0F0F0F0Fu;
    w.hi[0] = (r.q.x >> 4) & 0x0F0F0F0Fu;
    w.hi[1] = (r.q.y >> 4) & 0x0F0F0F0Fu;
    k_scale_min_pair(r.head.y, r.head.z, r.head.w, t / 4, w.sc, w.m);
    w.d = half_to_float(uint16_t(r.head.x));
    w.dmin = half_to_float(uint16_t(r.head.x >> 16));
    return w;
  }
  __host__ __device__ static float dot(const Lane& w, const int8_t* x, const float* xs, int64_t u, int t, float acc) {
    const int g = t / 4, l0 = (t % 4) * 8;
    const int8_t* xa = x + u * 256 + 64 * g + l0;
    const uint2 a = load_u64(xa), b = load_u64(xa + 32);
    const int da = dp4a(w.lo[0], a.x, dp4a(w.lo[1], a.y, 0)), db = dp4a(w.hi[0], b.x, dp4a(w.hi[1], b.y, 0));
    const int sa = dp4a(kOnes, a.x, dp4a(kOnes, a.y, 0)), sb = dp4a(kOnes, b.x, dp4a(kOnes, b.y, 0));
    const float dx = xs[u];
    acc = fmaf(w.d * dx, float(w.sc[0] * da + w.sc[1] * db), acc);
    return fmaf(-(w.dmin * dx), float(w.m[0] * sa + w.m[1] * sb), acc);
  }
};

// Q5_K: Q4_K's lanes, each code's fifth bit from qh (bit j of byte l: element 32j + l).
struct Q5_K {
  static constexpr int kLanes = 16, kUnitElems = 256, kUnitBytes = 176;
  static int64_t row_bytes(int64_t n_in) { return n_in / 256 * kUnitBytes; }
  using Lane = Q4_K::Lane;
  struct Raw {
    Q4_K::Raw low;  // codes' low nibbles, scales, d and dmin as Q4_K keeps them
    uint2 h;
  };
  __host__ __device__ static Raw fetch(const uint8_t* row, int64_t u, int t, int64_t) {
    const uint8_t* b = row + u * kUnitBytes;
    const int g = t / 4, l0 = (t % 4) * 8;
    return Raw{{load_u64(b + 48 + 32 * g + l0), load_u128(b)}, load_u64(b + 16 + l0)};
  }
  __host__ __device__ static Lane decode(const Raw& r, int t) {
    const int g = t / 4;
    Lane w = Q4_K::decode(r.low, t);
    w.lo[0] |= ((r.h.x >> (2 * g)) & kOnes) << 4;
    w.lo[1] |= ((r.h.y >> (2 * g)) & kOnes) << 4;
    w.hi[0] |= ((r.h.x >> (2 * g + 1)) & kOnes) << 4;
    w.hi[1] |= ((r.h.y >> (2 * g + 1)) & kOnes) << 4;
    return w;
  }
  __host__ __device__ static float dot(const Lane& w, const int8_t* x, const float* xs, int64_t u, int t, float acc) {
    return Q4_K::dot(w, x, xs, u, t, acc);
  }
};

// Q6_K blocks on the GPU: the file's 210 bytes (ql 128, qh 64, scales 16, d 2), then 14 bytes of
// padding. 16 lanes a super-block; lane t holds 4 codes of each of the 4 groups of its half h = t / 8.
struct Q6_K {
  static constexpr int kLanes = 16, kUnitElems = 256, kUnitBytes = 224;
  static int64_t row_bytes(int64_t n_in) { return n_in / 256 * kUnitBytes; }
  struct Lane {
    uint32_t c[4];
    int sc[4];
    float d;
  };
  struct Raw {
    uint32_t ql0, ql1, qh, s0, s1;
    uint16_t d;
  };
  __host__ __device__ static Raw fetch(const uint8_t* row, int64_t u, int t, int64_t) {
    const uint8_t* b = row + u * kUnitBytes;
    const int h = t / 8, l0 = (t % 8) * 4;
    return Raw{load_u32(b + 64 * h + l0), load_u32(b + 64 * h + 32 + l0), load_u32(b + 128 + 32 * h + l0),
               load_u32(b + 192 + 8 * h),  load_u32(b + 196 + 8 * h),      load_u16(b + 208)};
  }
  __host__ __device__ static Lane decode(const Raw& r, int t) {
    const uint32_t ql0 = r.ql0, ql1 = r.ql1, qh = r.qh;
    Lane w;
    w.c[0] = sub_bytes((ql0 & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4), 0x20202020u);
    w.c[1] = sub_bytes((ql1 & 0x0F0F0F0Fu) | (((qh >> 2) & 0x03030303u) << 4), 0x20202020u);
    w.c[2] = sub_bytes(((ql0 >> 4) & 0x0F0F0F0Fu) | (((qh >> 4) & 0x03030303u) << 4), 0x20202020u);
    w.c[3] = sub_bytes(((ql1 >> 4) & 0x0F0F0F0Fu) | (((qh >> 6) & 0x03030303u) << 4), 0x20202020u);
    const int k = (t % 8) * 4 / 16;  // which of each group's two scales
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      const int i = 2 * g + k;
      w.sc[g] = int(int8_t(uint8_t((i < 4 ? r.s0 : r.s1) >> (8 * (i & 3)))));
    }
    w.d = half_to_float(r.d);
    return w;
  }
  __host__ __device__ static float dot(const Lane& w, const int8_t* x, const float* xs, int64_t u, int t, float acc) {
    const int h = t / 8, l0 = (t % 8) * 4;
    const int8_t* xa = x + u * 256 + 128 * h + l0;
    int sumi = 0;
#pragma unroll
    for (int g = 0; g < 4; ++g) sumi += w.sc[g] * dp4a(w.c[g], load_u32(xa + 32 * g), 0);
    return fmaf(w.d * xs[u], float(sumi), acc);
  }
};

// Q8_0: one lane a 32-block.
struct Q8_0 {
  static constexpr int kLanes = 1, kUnitElems = 32;
  static int64_t row_bytes(int64_t n_in) { return (n_in + n_in / 32 * 2 + 15) / 16 * 16; }
  struct Lane {
    uint4 a, b;
    float d;
  };
  using Raw = Lane;
  __host__ __device__ static Raw fetch(const uint8_t* row, int64_t u, int, int64_t n_in) {
    return Lane{load_u128(row + u * 32), load_u128(row + u * 32 + 16), half_to_float(load_u16(row + n_in + 2 * u))};
  }
  __host__ __device__ static Lane decode(const Raw& r, int) { return r; }
  __host__ __device__ static float dot(const Lane& w, const int8_t* x, const float* xs, int64_t u, int, float acc) {
    const uint4 a = load_u128(x + u * 32), b = load_u128(x + u * 32 + 16);
    int s = dp4a(w.a.x, a.x, 0);
    s = dp4a(w.a.y, a.y, s);
    s = dp4a(w.a.z, a.z, s);
    s = dp4a(w.a.w, a.w, s);
    s = dp4a(w.b.x, b.x, s);
    s = dp4a(w.b.y, b.y, s);
    s = dp4a(w.b.z, b.z, s);
    s = dp4a(w.b.w, b.w, s);
    return fmaf(w.d * xs[u], float(s), acc);
  }
};

// One warp per 256 values of a row (blockIdx.y).
__global__ void quantize_kernel(ActFormat f, const float* __restrict__ x, int64_t xs, int64_t n_in,
                                int8_t* __restrict__ codes, float* __restrict__ scales) {
  const int64_t c = int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (c * 256 >= n_in) return;  // whole warps only
  const int r = blockIdx.y;
  quantize_chunk(f, x + int64_t(r) * xs, n_in, c, threadIdx.x % kWarp, codes + int64_t(r) * n_in,
                 scales + int64_t(r) * (n_in / 32));
}

void quantize_rows(ActFormat f, const float* x, int64_t xs, int rows, int64_t n_in, const ActScratch& scratch,
                   cudaStream_t s) {
  if (int64_t(rows) * n_in > scratch.capacity) {
    throw std::invalid_argument("cuda matmul: activations over the quantisation scratch planned at load");
  }
  constexpr int kWarpsPerBlock = 4;
  const dim3 grid(unsigned((n_in + 256 * kWarpsPerBlock - 1) / (256 * kWarpsPerBlock)), unsigned(rows));
  quantize_kernel<<<grid, kWarpsPerBlock * kWarp, 0, s>>>(f, x, xs, n_in, scratch.codes, scratch.scales);
  check(cudaGetLastError(), "quantize activations");
}

// Units of a lane in flight at once: their loads are issued together (decode is latency-bound
// otherwise); the sums still run unit by unit in order. One row has the registers for more.
template <int kRowGroup>
constexpr int kBlockUnitsInFlight = kRowGroup == 1 ? 8 : 4;

// One warp per output o, kRowGroup activation rows per block row; lane l takes part l % kLanes of the
// units l / kLanes, l / kLanes + 32 / kLanes, ... in order, then the butterfly sum.
template <typename B, int kRowGroup>
__global__ void matmul_blocks_kernel(MatmulTargets ts, ActRows x, int rows) {
  const int lane = threadIdx.x % kWarp;
  const MatmulTarget* tg;
  int64_t o;
  if (!find_output(ts, tg, o)) return;  // whole warps only
  float* __restrict__ y = tg->y;
  const int64_t ys = tg->ys;
  const int r0 = blockIdx.y * kRowGroup;
  const int nr = min(kRowGroup, rows - r0);
  const uint8_t* wr = tg->data + o * tg->row_bytes;
  const int64_t n_units = x.n_in / B::kUnitElems;
  constexpr int kStep = kWarp / B::kLanes;
  const int t = lane % B::kLanes;
  float acc[kRowGroup];
#pragma unroll
  for (int r = 0; r < kRowGroup; ++r) acc[r] = 0.f;
  for (int64_t u0 = lane / B::kLanes; u0 < n_units; u0 += kStep * kBlockUnitsInFlight<kRowGroup>) {
    typename B::Raw raw[kBlockUnitsInFlight<kRowGroup>];
#pragma unroll
    for (int i = 0; i < kBlockUnitsInFlight<kRowGroup>; ++i) {
      if (u0 + i * kStep < n_units) raw[i] = B::fetch(wr, u0 + i * kStep, t, x.n_in);
    }
#pragma unroll
    for (int i = 0; i < kBlockUnitsInFlight<kRowGroup>; ++i) {
      const int64_t u = u0 + i * kStep;
      if (u >= n_units) continue;
      const typename B::Lane w = B::decode(raw[i], t);
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r) {
        if (r < nr) acc[r] = B::dot(w, x.row(r0 + r), x.row_scales(r0 + r), u, t, acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowGroup; ++r) {
    float a = acc[r];
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) a += __shfl_xor_sync(0xffffffffu, a, off);
    if (lane == 0 && r < nr) y[int64_t(r0 + r) * ys + o] = a;
  }
}

// One output of the kernel above computed on the host: every lane's sum in the kernel's order, then
// the butterfly.
template <typename B>
float dot_row_as_warp(const uint8_t* row, const int8_t* codes, const float* scales, int64_t n_in) {
  float acc[kWarp];
  const int64_t n_units = n_in / B::kUnitElems;
  for (int lane = 0; lane < kWarp; ++lane) {
    acc[lane] = 0.f;
    for (int64_t u = lane / B::kLanes; u < n_units; u += kWarp / B::kLanes) {
      const int t = lane % B::kLanes;
      acc[lane] = B::dot(B::decode(B::fetch(row, u, t, n_in), t), codes, scales, u, t, acc[lane]);
    }
  }
  for (int off = kWarp / 2; off > 0; off /= 2) {
    float next[kWarp];
    for (int lane = 0; lane < kWarp; ++lane) next[lane] = acc[lane] + acc[lane ^ off];
    std::copy(next, next + kWarp, acc);
  }
  return acc[0];
}

// The grid of one launch for `outs` (which share a layout and n_in) and the targets its blocks find.
MatmulTargets targets(std::span<const MatmulOutput> outs) {
  MatmulTargets ts{};
  ts.count = int(outs.size());
  for (int i = 0; i < ts.count; ++i) {
    const MatmulOutput& m = outs[size_t(i)];
    ts.t[i] = {static_cast<const uint8_t*>(m.w.data), m.w.n_out, m.w.row_bytes, m.y, m.y_stride};
    ts.blocks[i + 1] = ts.blocks[i] + int((m.w.n_out + kMatmulWarps - 1) / kMatmulWarps);
  }
  return ts;
}

template <int RG>
void launch_floats(std::span<const MatmulOutput> outs, const float* x, int64_t xs, int rows, cudaStream_t s) {
  const GpuMatrix& w = outs[0].w;
  const MatmulTargets ts = targets(outs);
  const dim3 grid(unsigned(ts.blocks[ts.count]), unsigned((rows + RG - 1) / RG));
  // 16-byte loads need the activation rows and every weight row 16-byte aligned
  const bool x_aligned = xs % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    if (x_aligned && (w.n_in * int64_t(sizeof(T))) % 16 == 0) {
      matmul_kernel<T, true, RG><<<grid, kMatmulWarps * kWarp, 0, s>>>(ts, w.n_in, x, xs, rows);
    } else {
      matmul_kernel<T, false, RG><<<grid, kMatmulWarps * kWarp, 0, s>>>(ts, w.n_in, x, xs, rows);
    }
  };
  switch (w.kind) {
    case WeightKind::F32: run(float{}); break;
    case WeightKind::F16: run(__half{}); break;
    case WeightKind::BF16: run(__nv_bfloat16{}); break;
    default: throw std::logic_error("launch_floats: not a float layout");
  }
  check(cudaGetLastError(), "matmul");
}

template <typename B, int RG>
void launch_blocks(std::span<const MatmulOutput> outs, const ActRows& x, int rows, cudaStream_t s) {
  const MatmulTargets ts = targets(outs);
  const dim3 grid(unsigned(ts.blocks[ts.count]), unsigned((rows + RG - 1) / RG));
  matmul_blocks_kernel<B, RG><<<grid, kMatmulWarps * kWarp, 0, s>>>(ts, x, rows);
  check(cudaGetLastError(), "matmul");
}

template <int RG>
void launch_group(std::span<const MatmulOutput> outs, const float* x, int64_t xs, int rows, ActScratch& scratch,
                  ActFormat& quantised, cudaStream_t s) {
  const GpuMatrix& w = outs[0].w;
  const ActFormat f = act_format(w.kind);
  if (f == ActFormat::None) return launch_floats<RG>(outs, x, xs, rows, s);
  // 16-byte loads of the activations need their rows 16-byte aligned
  if (xs % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    throw std::invalid_argument("cuda matmul: activation rows must be 16-byte aligned for block formats");
  }
  if (quantised != f) {  // the rows are quantised once for every matrix of the call that reads this format
    quantize_rows(f, x, xs, rows, w.n_in, scratch, s);
    quantised = f;
  }
  const ActRows q{scratch.codes, scratch.scales, w.n_in};
  switch (w.kind) {
    case WeightKind::Q8_0: launch_blocks<Q8_0, RG>(outs, q, rows, s); break;
    case WeightKind::Q4_K: launch_blocks<Q4_K, RG>(outs, q, rows, s); break;
    case WeightKind::Q5_K: launch_blocks<Q5_K, RG>(outs, q, rows, s); break;
    case WeightKind::Q6_K: launch_blocks<Q6_K, RG>(outs, q, rows, s); break;
    default: break;
  }
}

// Host twins of the quantisers above (tests compare them with the CPU's bit for bit).
void quantize_q8_k_host(const float* x, int64_t n_in, int8_t* codes, float* scales) {
  for (int64_t u = 0; u < n_in / 256; ++u) {
    const float* v = x + u * 256;
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(v[j]) > amax) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    }
    if (amax != 0.f) {
      q8_k_codes(v, 256, max, codes + u * 256);
    } else {
      std::fill(codes + u * 256, codes + u * 256 + 256, int8_t(0));
    }
    scales[u] = q8_k_scale(amax != 0.f ? max : 0.f);
  }
}

void quantize_q8_0_host(const float* x, int64_t n_in, int8_t* codes, float* scales) {
  for (int64_t b = 0; b < n_in / 32; ++b) {
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
    q8_0_codes(x + b * 32, 32, amax, codes + b * 32);
    scales[b] = to_half_and_back(amax / 127);
  }
}

}  // namespace

GpuMatrix GpuMatrix::rows(int64_t first, int64_t count) const {
  GpuMatrix m = *this;
  m.data = static_cast<const char*>(data) + first * row_bytes;
  m.n_out = count;
  return m;
}

ActFormat act_format(WeightKind k) {
  switch (k) {
    case WeightKind::Q8_0: return ActFormat::Q8_0;
    case WeightKind::Q4_K:
    case WeightKind::Q5_K:
    case WeightKind::Q6_K: return ActFormat::Q8_K;
    default: return ActFormat::None;
  }
}

void matmul_shared(std::span<const MatmulOutput> outs, const float* x, int64_t xs, int rows, ActScratch& scratch,
                   cudaStream_t s) {
  // codes a kernel wrote for exactly these rows are read as they are; they serve this call only
  ActFormat quantised = scratch.quantised_x == x && scratch.quantised_rows == rows && xs == outs[0].w.n_in &&
                                scratch.quantised_width == outs[0].w.n_in
                            ? scratch.quantised_format
                            : ActFormat::None;
  scratch.quantised_x = nullptr;
  if (rows <= 0) return;
  // runs of outputs with one layout and input width share a launch
  for (size_t first = 0; first < outs.size();) {
    size_t end = first + 1;
    while (end < outs.size() && end - first < size_t(kMaxTargets) && outs[end].w.kind == outs[first].w.kind &&
           outs[end].w.n_in == outs[first].w.n_in) {
      ++end;
    }
    if (outs[first].w.n_in != outs[0].w.n_in) quantised = ActFormat::None;  // another width: quantise again
    const std::span<const MatmulOutput> group = outs.subspan(first, end - first);
    if (rows == 1) {  // decode of one sequence: the fewest registers, the most warps in flight
      launch_group<1>(group, x, xs, rows, scratch, quantised, s);
    } else if (rows <= kSmallRowGroup) {
      launch_group<kSmallRowGroup>(group, x, xs, rows, scratch, quantised, s);
    } else {
      launch_group<kLargeRowGroup>(group, x, xs, rows, scratch, quantised, s);
    }
    first = end;
  }
}

void matmul(const GpuMatrix& w, const float* x, int64_t xs, int rows, float* y, int64_t ys, ActScratch& scratch,
            cudaStream_t s) {
  const MatmulOutput one{w, y, ys};
  matmul_shared(std::span<const MatmulOutput>(&one, 1), x, xs, rows, scratch, s);
}

bool has_block_layout(gguf::TensorType t) {
  return t == gguf::TensorType::Q8_0 || t == gguf::TensorType::Q4_K || t == gguf::TensorType::Q5_K ||
         t == gguf::TensorType::Q6_K;
}

int64_t gpu_block_row_bytes(gguf::TensorType t, int64_t n_in) {
  switch (t) {
    case gguf::TensorType::Q8_0: return Q8_0::row_bytes(n_in);
    case gguf::TensorType::Q4_K: return Q4_K::row_bytes(n_in);
    case gguf::TensorType::Q5_K: return Q5_K::row_bytes(n_in);
    case gguf::TensorType::Q6_K: return Q6_K::row_bytes(n_in);
    default: throw std::invalid_argument("gpu_block_row_bytes: not a block format the GPU reads in place");
  }
}

void to_gpu_row(gguf::TensorType t, const uint8_t* file_row, int64_t n_in, uint8_t* out) {
  switch (t) {
    case gguf::TensorType::Q8_0:
      std::memset(out, 0, size_t(Q8_0::row_bytes(n_in)));
      for (int64_t i = 0; i < n_in / 32; ++i) {
        std::memcpy(out + i * 32, file_row + i * 34 + 2, 32);
        std::memcpy(out + n_in + 2 * i, file_row + i * 34, 2);
      }
      return;
    case gguf::TensorType::Q6_K:
      for (int64_t i = 0; i < n_in / 256; ++i) {
        std::memcpy(out + i * Q6_K::kUnitBytes, file_row + i * 210, 210);
        std::memset(out + i * Q6_K::kUnitBytes + 210, 0, Q6_K::kUnitBytes - 210);
      }
      return;
    case gguf::TensorType::Q4_K:
    case gguf::TensorType::Q5_K: std::memcpy(out, file_row, size_t(gpu_block_row_bytes(t, n_in))); return;
    default: throw std::invalid_argument("to_gpu_row: not a block format the GPU reads in place");
  }
}

void quantize_activations_as_gpu(gguf::TensorType t, const float* x, int64_t n_in, int8_t* codes, float* scales) {
  if (t == gguf::TensorType::Q8_0) {
    quantize_q8_0_host(x, n_in, codes, scales);
  } else if (has_block_layout(t)) {
    quantize_q8_k_host(x, n_in, codes, scales);
  } else {
    throw std::invalid_argument("quantize_activations_as_gpu: not a block format the GPU reads in place");
  }
}

float dot_gpu_row(gguf::TensorType t, const uint8_t* gpu_row, int64_t n_in, const int8_t* codes, const float* scales) {
  switch (t) {
    case gguf::TensorType::Q8_0: return dot_row_as_warp<Q8_0>(gpu_row, codes, scales, n_in);
    case gguf::TensorType::Q4_K: return dot_row_as_warp<Q4_K>(gpu_row, codes, scales, n_in);
    case gguf::TensorType::Q5_K: return dot_row_as_warp<Q5_K>(gpu_row, codes, scales, n_in);
    case gguf::TensorType::Q6_K: return dot_row_as_warp<Q6_K>(gpu_row, codes, scales, n_in);
    default: throw std::invalid_argument("dot_gpu_row: not a block format the GPU reads in place");
  }
}

}  // namespace infer::cuda
