// The GPU matmul, y = x · Wᵀ, for every weight layout the backend keeps: F32/F16/BF16 rows, and Q8_0,
// Q4_K, Q5_K, Q6_K blocks as the file stores them (dequantised in registers). One warp per output and
// a fixed split of each row over its lanes, so an output's arithmetic does not depend on how many
// rows the batch has or where this one sits in it (invariant 7); each weight load serves up to
// a group of activation rows (kSmallRowGroup or kLargeRowGroup).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <span>
#include <stdexcept>

#include "cuda/block_layout.h"
#include "cuda/check.h"
#include "cuda/gpu_kernels.h"

namespace infer::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kMatmulWarps = 8;  // outputs per block
// Activation rows per block: each weight load serves all of them. Small batches (decode) take 8, large
// ones (prefill) 32, so that the weights are read a quarter as often; a row's arithmetic is the same.
constexpr int kSmallRowGroup = 8, kLargeRowGroup = 32;
constexpr int kUnits = 4;        // weight loads in flight per lane (block formats; float rows: chunks)

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

// 8 activations at xr (16-byte aligned: launch() checks the rows) as two 16-byte loads.
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

// ---- block formats: each lane decodes 8 consecutive weights of a 256-element unit ----
// A unit is one super-block (K-quants) or 8 Q8_0 blocks; lane l takes its elements 8l .. 8l+7, which
// always share one scale. Rows are laid out (gpu_row_bytes, to_gpu_row) so that each lane's codes are
// one aligned 8-byte load: Q4_K and Q5_K as stored; Q6_K blocks padded from 210 to 224 bytes; Q8_0
// rows as all their codes, then all their f16 scales. The decoders also run on the host (tests).

__host__ __device__ inline float half_to_float(uint16_t h) {
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
}

__host__ __device__ inline uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

__host__ __device__ inline void load8(const uint8_t* p, uint8_t* out) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  memcpy(out, &v, 8);
}

// The 6-bit scale and min of sub-block j from a K-quant's 12 scale bytes, read as three words and
// picked with shifts (a byte array indexed at run time would live in local memory).
__host__ __device__ inline uint32_t scale_byte(const uint32_t* w, int i) {
  const uint32_t word = i < 4 ? w[0] : (i < 8 ? w[1] : w[2]);
  return (word >> (8 * (i & 3))) & 0xFFu;
}

__host__ __device__ inline void k_scale_min(const uint8_t* b4, int j, int& sc, int& m) {
  const uint32_t* p = reinterpret_cast<const uint32_t*>(b4);
  const uint32_t w[3] = {p[0], p[1], p[2]};
  if (j < 4) {
    sc = int(scale_byte(w, j) & 63);
    m = int(scale_byte(w, j + 4) & 63);
  } else {
    sc = int((scale_byte(w, j + 4) & 0x0F) | ((scale_byte(w, j - 4) >> 6) << 4));
    m = int((scale_byte(w, j + 4) >> 4) | ((scale_byte(w, j) >> 6) << 4));
  }
}

struct Q8_0 {
  static int64_t row_bytes(int64_t n_in) { return (n_in + n_in / 32 * 2 + 15) / 16 * 16; }
  __host__ __device__ static void decode8(const uint8_t* row, int64_t u, int64_t n_in, int lane, float* w) {
    uint8_t q[8];
    load8(row + u * 256 + 8 * lane, q);
    const float d = half_to_float(load_u16(row + n_in + 2 * (u * 8 + lane / 4)));
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = d * float(int8_t(q[j]));
  }
};

struct Q4_K {
  static constexpr int kUnitBytes = 144;
  static int64_t row_bytes(int64_t n_in) { return n_in / 256 * kUnitBytes; }
  __host__ __device__ static void decode8(const uint8_t* row, int64_t u, int64_t, int lane, float* w) {
    const uint8_t* b = row + u * kUnitBytes;
    const int e = 8 * lane, sub = e / 32;
    int sc, m;
    k_scale_min(b + 4, sub, sc, m);
    const uint32_t dd = *reinterpret_cast<const uint32_t*>(b);
    const float d1 = half_to_float(uint16_t(dd)) * float(sc), m1 = half_to_float(uint16_t(dd >> 16)) * float(m);
    uint8_t qs[8];
    load8(b + 16 + 32 * (e / 64) + e % 32, qs);
    const int shift = (e % 64) < 32 ? 0 : 4;
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = d1 * float((qs[j] >> shift) & 0x0F) - m1;
  }
};

struct Q5_K {
  static constexpr int kUnitBytes = 176;
  static int64_t row_bytes(int64_t n_in) { return n_in / 256 * kUnitBytes; }
  __host__ __device__ static void decode8(const uint8_t* row, int64_t u, int64_t, int lane, float* w) {
    const uint8_t* b = row + u * kUnitBytes;
    const int e = 8 * lane, sub = e / 32;
    int sc, m;
    k_scale_min(b + 4, sub, sc, m);
    const uint32_t dd = *reinterpret_cast<const uint32_t*>(b);
    const float d1 = half_to_float(uint16_t(dd)) * float(sc), m1 = half_to_float(uint16_t(dd >> 16)) * float(m);
    uint8_t qh[8], qs[8];
    load8(b + 16 + e % 32, qh);
    load8(b + 48 + 32 * (e / 64) + e % 32, qs);
    const int shift = (e % 64) < 32 ? 0 : 4;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int q = ((qs[j] >> shift) & 0x0F) + 16 * ((qh[j] >> sub) & 1);
      w[j] = d1 * float(q) - m1;
    }
  }
};

// Q6_K blocks on the GPU: the file's 210 bytes (ql 128, qh 64, scales 16, d 2), then 14 bytes of padding.
struct Q6_K {
  static constexpr int kUnitBytes = 224;
  static int64_t row_bytes(int64_t n_in) { return n_in / 256 * kUnitBytes; }
  __host__ __device__ static void decode8(const uint8_t* row, int64_t u, int64_t, int lane, float* w) {
    const uint8_t* b = row + u * kUnitBytes;
    const int e = 8 * lane, h = e / 128, r = e % 128, g = r / 32, l = r % 32;
    uint8_t ql[8], qh[8];
    load8(b + 64 * h + 32 * (g % 2) + l, ql);
    load8(b + 128 + 32 * h + l, qh);
    const float d1 = half_to_float(load_u16(b + 208)) * float(int8_t(b[192 + e / 16]));
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int q = (((ql[j] >> (4 * (g / 2))) & 0x0F) | (((qh[j] >> (2 * g)) & 3) << 4)) - 32;
      w[j] = d1 * float(q);
    }
  }
};

// One row of n_in weights decoded on the host the way the kernel's lanes decode it.
template <typename B>
void decode_row(const uint8_t* row, int64_t n_in, float* out) {
  for (int64_t u = 0; u * 256 < n_in; ++u) {
    for (int lane = 0; lane < 32; ++lane) {
      if (u * 256 + 8 * lane >= n_in) continue;
      B::decode8(row, u, n_in, lane, out + u * 256 + 8 * lane);
    }
  }
}

template <typename B, int kRowGroup>
__global__ void matmul_blocks_kernel(MatmulTargets ts, int64_t n_in, const float* __restrict__ x, int64_t xs,
                                     int rows) {
  const int lane = threadIdx.x % kWarp;
  const MatmulTarget* tg;
  int64_t o;
  if (!find_output(ts, tg, o)) return;  // whole warps only
  float* __restrict__ y = tg->y;
  const int64_t ys = tg->ys;
  const int r0 = blockIdx.y * kRowGroup;
  const int nr = min(kRowGroup, rows - r0);
  const uint8_t* wr = tg->data + o * tg->row_bytes;
  const float* x0 = x + int64_t(r0) * xs;
  float acc[kRowGroup];
#pragma unroll
  for (int r = 0; r < kRowGroup; ++r) acc[r] = 0.f;
  const int64_t n_units = (n_in + 255) / 256;
  // kUnits units per step: their loads are issued together (decode is latency-bound otherwise); the
  // sums still run unit by unit in order, so the arithmetic is that of one unit at a time.
  for (int64_t u0 = 0; u0 < n_units; u0 += kUnits) {
    float wv[kUnits][8];
#pragma unroll
    for (int i = 0; i < kUnits; ++i) {
      if (u0 + i < n_units && (u0 + i) * 256 + 8 * lane < n_in) B::decode8(wr, u0 + i, n_in, lane, wv[i]);
    }
#pragma unroll
    for (int i = 0; i < kUnits; ++i) {
      const int64_t k0 = (u0 + i) * 256 + 8 * lane;
      if (u0 + i >= n_units || k0 >= n_in) continue;  // past the row, or a short last Q8_0 unit
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r) {
        if (r < nr) {
          float xv[8];
          load_x8(x0 + int64_t(r) * xs + k0, xv);
          float a = acc[r];
#pragma unroll
          for (int j = 0; j < 8; ++j) a = fmaf(wv[i][j], xv[j], a);
          acc[r] = a;
        }
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

// One launch for outputs [first, first + count) of `outs`, which share a layout and n_in.
template <typename K>
void launch(K kernel, std::span<const MatmulOutput> outs, const float* x, int64_t xs, int rows, int rg, cudaStream_t s) {
  MatmulTargets ts{};
  ts.count = int(outs.size());
  for (int i = 0; i < ts.count; ++i) {
    const MatmulOutput& m = outs[size_t(i)];
    ts.t[i] = {static_cast<const uint8_t*>(m.w.data), m.w.n_out, m.w.row_bytes, m.y, m.y_stride};
    ts.blocks[i + 1] = ts.blocks[i] + int((m.w.n_out + kMatmulWarps - 1) / kMatmulWarps);
  }
  const dim3 grid(unsigned(ts.blocks[ts.count]), unsigned((rows + rg - 1) / rg));
  kernel<<<grid, kMatmulWarps * kWarp, 0, s>>>(ts, outs[0].w.n_in, x, xs, rows);
  check(cudaGetLastError(), "matmul");
}

template <int RG>
void launch_group(std::span<const MatmulOutput> outs, const float* x, int64_t xs, int rows, cudaStream_t s) {
  const GpuMatrix& w = outs[0].w;
  // 16-byte loads of the activations need their rows 16-byte aligned
  const bool x_aligned = xs % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  if (!x_aligned && w.kind != WeightKind::F32 && w.kind != WeightKind::F16 && w.kind != WeightKind::BF16) {
    throw std::invalid_argument("cuda matmul: activation rows must be 16-byte aligned for block formats");
  }
  auto floats = [&](auto zero) {
    using T = decltype(zero);
    // 16-byte loads need every weight row 16-byte aligned
    if (x_aligned && (w.n_in * int64_t(sizeof(T))) % 16 == 0) {
      launch(matmul_kernel<T, true, RG>, outs, x, xs, rows, RG, s);
    } else {
      launch(matmul_kernel<T, false, RG>, outs, x, xs, rows, RG, s);
    }
  };
  switch (w.kind) {
    case WeightKind::F32: floats(float{}); break;
    case WeightKind::F16: floats(__half{}); break;
    case WeightKind::BF16: floats(__nv_bfloat16{}); break;
    case WeightKind::Q8_0: launch(matmul_blocks_kernel<Q8_0, RG>, outs, x, xs, rows, RG, s); break;
    case WeightKind::Q4_K: launch(matmul_blocks_kernel<Q4_K, RG>, outs, x, xs, rows, RG, s); break;
    case WeightKind::Q5_K: launch(matmul_blocks_kernel<Q5_K, RG>, outs, x, xs, rows, RG, s); break;
    case WeightKind::Q6_K: launch(matmul_blocks_kernel<Q6_K, RG>, outs, x, xs, rows, RG, s); break;
  }
}

}  // namespace

GpuMatrix GpuMatrix::rows(int64_t first, int64_t count) const {
  GpuMatrix m = *this;
  m.data = static_cast<const char*>(data) + first * row_bytes;
  m.n_out = count;
  return m;
}

void matmul_shared(std::span<const MatmulOutput> outs, const float* x, int64_t xs, int rows, cudaStream_t s) {
  if (rows <= 0) return;
  // runs of outputs with one layout and input width share a launch
  for (size_t first = 0; first < outs.size();) {
    size_t end = first + 1;
    while (end < outs.size() && end - first < size_t(kMaxTargets) && outs[end].w.kind == outs[first].w.kind &&
           outs[end].w.n_in == outs[first].w.n_in) {
      ++end;
    }
    const std::span<const MatmulOutput> group = outs.subspan(first, end - first);
    if (rows <= kSmallRowGroup) {
      launch_group<kSmallRowGroup>(group, x, xs, rows, s);
    } else {
      launch_group<kLargeRowGroup>(group, x, xs, rows, s);
    }
    first = end;
  }
}

void matmul(const GpuMatrix& w, const float* x, int64_t xs, int rows, float* y, int64_t ys, cudaStream_t s) {
  const MatmulOutput one{w, y, ys};
  matmul_shared(std::span<const MatmulOutput>(&one, 1), x, xs, rows, s);
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

void decode_gpu_row(gguf::TensorType t, const uint8_t* gpu_row, int64_t n_in, float* out) {
  switch (t) {
    case gguf::TensorType::Q8_0: decode_row<Q8_0>(gpu_row, n_in, out); return;
    case gguf::TensorType::Q4_K: decode_row<Q4_K>(gpu_row, n_in, out); return;
    case gguf::TensorType::Q5_K: decode_row<Q5_K>(gpu_row, n_in, out); return;
    case gguf::TensorType::Q6_K: decode_row<Q6_K>(gpu_row, n_in, out); return;
    default: throw std::invalid_argument("decode_gpu_row: not a block format the GPU reads in place");
  }
}

}  // namespace infer::cuda
