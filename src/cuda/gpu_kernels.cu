#include <stdexcept>
#include <string>

#include "cuda/act_quant.cuh"
#include "cuda/check.h"
#include "cuda/gpu_kernels.h"

namespace infer::cuda {
namespace {

constexpr int kNormThreads = 256;  // a power of two (the reductions halve it)
constexpr int kAttThreads = 128;   // keys per tile; also dims per thread pass (head_dim ≤ 2·kAttThreads)
constexpr int kMaxHeadDim = 2 * kAttThreads;

int blocks_for(int64_t n, int threads) { return int((n + threads - 1) / threads); }

void check_launch(const char* what) { check(cudaGetLastError(), what); }

// A kernel that writes a matmul's input rows quantises them too when they fit the scratch in whole
// 256-value chunks (else None: the matmul quantises them itself), and says which rows it quantised.
ActFormat fused_format(const ActScratch& act, ActFormat f, int rows, int width) {
  return f != ActFormat::None && int64_t(rows) * width <= act.capacity && width % 256 == 0 ? f : ActFormat::None;
}
void mark_quantised(ActScratch& act, const float* rows_at, ActFormat f, int rows, int width) {
  act.quantised_x = f != ActFormat::None ? rows_at : nullptr;
  act.quantised_format = f;
  act.quantised_width = width;
  act.quantised_rows = rows;
}

// A block's sum of one double per thread, in a fixed tree order; every thread gets the total.
__device__ double block_sum(double v, double* part) {
  part[threadIdx.x] = v;
  __syncthreads();
  for (int st = kNormThreads / 2; st > 0; st /= 2) {
    if (threadIdx.x < st) part[threadIdx.x] += part[threadIdx.x + st];
    __syncthreads();
  }
  const double total = part[0];
  __syncthreads();  // part is reused by the next call
  return total;
}

// Elements a thread loads before it uses any: the loads of a pass go out together rather than one
// memory latency per element (out may alias x, so the compiler may not reorder them itself).
constexpr int kNormBatch = 8;

// Row r of x (row index[r] when index is set): with `residual`, x row += residual row first (stored
// back), then out row = rmsnorm(x row) · w. Thread t takes elements t, t + kNormThreads, ... in order.
__global__ void rmsnorm_kernel(float* x, int64_t xs, const int* index, const float* residual, const float* w, float* out,
                               int64_t os, int width, float eps, ActFormat f, int8_t* codes, float* scales) {
  __shared__ double part[kNormThreads];
  const int r = blockIdx.x;
  float* xr = x + int64_t(index ? index[r] : r) * xs;
  float* orow = out + int64_t(r) * os;
  double s = 0;
  for (int i0 = threadIdx.x; i0 < width; i0 += kNormBatch * kNormThreads) {
    float v[kNormBatch];
#pragma unroll
    for (int j = 0; j < kNormBatch; ++j) {
      const int i = i0 + j * kNormThreads;
      v[j] = i < width ? xr[i] : 0.f;
      if (residual && i < width) v[j] += residual[int64_t(r) * xs + i];
    }
#pragma unroll
    for (int j = 0; j < kNormBatch; ++j) {
      const int i = i0 + j * kNormThreads;
      if (i >= width) break;
      if (residual) xr[i] = v[j];  // each thread reads back only what it stored
      s += double(v[j] * v[j]);
    }
  }
  const float mean = float(block_sum(s, part) / double(width));
  const float rs = 1.0f / sqrtf(mean + eps);
  for (int i0 = threadIdx.x; i0 < width; i0 += kNormBatch * kNormThreads) {
    float v[kNormBatch], wv[kNormBatch];
#pragma unroll
    for (int j = 0; j < kNormBatch; ++j) {
      const int i = i0 + j * kNormThreads;
      v[j] = i < width ? xr[i] : 0.f;
      wv[j] = i < width && w ? w[i] : 1.f;
    }
#pragma unroll
    for (int j = 0; j < kNormBatch; ++j) {
      const int i = i0 + j * kNormThreads;
      if (i >= width) break;
      const float y = v[j] * rs;
      orow[i] = w ? y * wv[j] : y;
    }
  }
  if (f == ActFormat::None) return;
  __syncthreads();  // the row is written: each warp quantises its chunks of it
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t c = warp; c * 256 < width; c += kNormThreads / 32) {
    quantize_chunk(f, orow, width, c, lane, codes + int64_t(r) * width, scales + int64_t(r) * (width / 32));
  }
}

// RMSNorm of one head in place (q/k norms) by a block of any size that divides kNormThreads: the sums
// of squares fill block_sum's kNormThreads slots and are added in its tree order, whatever the size.
__device__ void head_rmsnorm(float* xr, const float* w, int head_dim, float eps, double* part) {
  for (int slot = threadIdx.x; slot < kNormThreads; slot += blockDim.x) {
    double s = 0;
    for (int i = slot; i < head_dim; i += kNormThreads) s += double(xr[i] * xr[i]);
    part[slot] = s;
  }
  __syncthreads();
  for (int st = kNormThreads / 2; st > 0; st /= 2) {
    for (int slot = threadIdx.x; slot < st; slot += blockDim.x) part[slot] += part[slot + st];
    __syncthreads();
  }
  const float mean = float(part[0] / double(head_dim));
  const float rs = 1.0f / sqrtf(mean + eps);
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) xr[i] = xr[i] * rs * w[i];
  __syncthreads();  // RoPE then reads other threads' elements
}

__global__ void layernorm_kernel(float* x, int width, const float* w, const float* b, float eps) {
  __shared__ double part[kNormThreads];
  float* xr = x + int64_t(blockIdx.x) * width;
  double s = 0;
  for (int i = threadIdx.x; i < width; i += kNormThreads) s += double(xr[i]);
  const float mean = float(block_sum(s, part) / double(width));
  double s2 = 0;
  for (int i = threadIdx.x; i < width; i += kNormThreads) {
    const float d = xr[i] - mean;
    s2 += double(d * d);
  }
  const float var = float(block_sum(s2, part) / double(width));
  const float rs = 1.0f / sqrtf(var + eps);
  for (int i = threadIdx.x; i < width; i += kNormThreads) {
    float v = (xr[i] - mean) * rs;
    if (w) v *= w[i];
    if (b) v += b[i];
    xr[i] = v;
  }
}

__device__ int64_t kv_row(const PagedLayer& kv, const RowsView& rv, int r, int t) {
  const int page = rv.page_tables[rv.pt_offset[r] + t / kv.page_tokens];
  return int64_t(page) * kv.page_stride + int64_t(t % kv.page_tokens) * kv.kv_dim;
}

// One block per (row, head): the head's q/k norm (when the model has them), RoPE of the q or k head
// (pairs a, b of the first 2·half dims); a k head then goes to the KV cache at the row's position with
// its v head, both rounded to F16. `rotate` false stores without RoPE (bert).
__global__ void rope_store_kernel(float* q, int n_head, float* k, const float* v, int n_kv_head, int head_dim,
                                  HeadNorms norms, const float* cos, const float* sin, int half, bool neox, bool rotate,
                                  PagedLayer kv, RowsView rv) {
  __shared__ double part[kNormThreads];
  const int r = blockIdx.x, h = blockIdx.y;
  const bool is_k = h >= n_head;
  float* head = is_k ? k + (int64_t(r) * n_kv_head + (h - n_head)) * head_dim : q + (int64_t(r) * n_head + h) * head_dim;
  if (norms.q) head_rmsnorm(head, is_k ? norms.k : norms.q, head_dim, norms.eps, part);
  if (!rotate && !is_k) return;
  const int64_t at = is_k ? kv_row(kv, rv, r, rv.pos[r]) + int64_t(h - n_head) * head_dim : 0;
  const int rotated = rotate ? 2 * half : 0;
  for (int i = threadIdx.x; i < rotated / 2; i += blockDim.x) {
    const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    const float c = cos[int64_t(r) * half + i], sn = sin[int64_t(r) * half + i];
    const float x0 = head[a], x1 = head[b];
    const float y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));  // unfused, as the CPU rounds it
    const float y1 = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
    head[a] = y0;
    head[b] = y1;
    if (is_k) {
      kv.k[at + a] = __float2half_rn(y0);
      kv.k[at + b] = __float2half_rn(y1);
    }
  }
  if (!is_k) return;
  const float* vr = v + (int64_t(r) * n_kv_head + (h - n_head)) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    if (d >= rotated) kv.k[at + d] = __float2half_rn(head[d]);
    kv.v[at + d] = __float2half_rn(vr[d]);
  }
}

__device__ float block_max_f(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int st = kAttThreads / 2; st > 0; st /= 2) {
    if (threadIdx.x < st) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + st]);
    __syncthreads();
  }
  const float m = red[0];
  __syncthreads();
  return m;
}

__device__ float block_sum_f(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int st = kAttThreads / 2; st > 0; st /= 2) {
    if (threadIdx.x < st) red[threadIdx.x] += red[threadIdx.x + st];
    __syncthreads();
  }
  const float m = red[0];
  __syncthreads();
  return m;
}

// One block per (row, head). Keys in tiles of kAttThreads: thread t scores key tile+t, the tile's
// maximum rescales the running sums, then thread t accumulates output dims t and t + kAttThreads.
__global__ void attention_kernel(const float* q, float* out, PagedLayer kv, RowsView rv, int n_head, int n_gqa,
                                 int head_dim, float scale, int window) {
  __shared__ float qs[kMaxHeadDim];
  __shared__ float p[kAttThreads];
  __shared__ float red[kAttThreads];
  __shared__ int64_t row_at[kAttThreads];  // where each key of the tile sits in the paged cache
  const int r = blockIdx.x, h = blockIdx.y, t = threadIdx.x;
  const int g = h / n_gqa;
  const int pos = rv.pos[r], end = rv.end[r];
  const int begin = window > 0 ? max(0, pos + 1 - window) : 0;
  const int64_t q_at = (int64_t(r) * n_head + h) * head_dim;
  for (int d = t; d < head_dim; d += kAttThreads) qs[d] = q[q_at + d];
  __syncthreads();
  float m = -INFINITY, l = 0.f, acc0 = 0.f, acc1 = 0.f;
  for (int tile = begin; tile < end; tile += kAttThreads) {
    const int j = tile + t;
    float s = -INFINITY;
    if (j < end) {
      const int64_t at = kv_row(kv, rv, r, j) + int64_t(g) * head_dim;
      row_at[t] = at;  // published by block_max_f's barriers
      const __half* kr = kv.k + at;
      float dot = 0.f;
      if (head_dim % 8 == 0) {  // 16-byte loads, the same products in the same order
        for (int d = 0; d < head_dim; d += 8) {
          const uint4 raw = *reinterpret_cast<const uint4*>(kr + d);
          const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float2 f = __half22float2(h[i]);
            dot = fmaf(qs[d + 2 * i], f.x, dot);
            dot = fmaf(qs[d + 2 * i + 1], f.y, dot);
          }
        }
      } else {
        for (int d = 0; d < head_dim; ++d) dot = fmaf(qs[d], __half2float(kr[d]), dot);
      }
      s = dot * scale;
    }
    const float m_new = fmaxf(m, block_max_f(s, red));  // key `tile` is always visible: finite
    const float pj = j < end ? expf(s - m_new) : 0.f;
    p[t] = pj;
    const float tile_sum = block_sum_f(pj, red);  // its barriers also publish p
    const float corr = expf(m - m_new);
    l = l * corr + tile_sum;
    acc0 *= corr;
    acc1 *= corr;
    const int n_keys = min(kAttThreads, end - tile);
#pragma unroll 4
    for (int jj = 0; jj < n_keys; ++jj) {
      const __half* vr = kv.v + row_at[jj];
      if (t < head_dim) acc0 = fmaf(p[jj], __half2float(vr[t]), acc0);
      if (t + kAttThreads < head_dim) acc1 = fmaf(p[jj], __half2float(vr[t + kAttThreads]), acc1);
    }
    m = m_new;
    __syncthreads();  // p is rewritten by the next tile
  }
  if (t < head_dim) out[q_at + t] = acc0 / l;
  if (t + kAttThreads < head_dim) out[q_at + t + kAttThreads] = acc1 / l;
}

__device__ float gelu_lookup(float x, const uint16_t* table) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return __half2float(__ushort_as_half(table[__half_as_ushort(__float2half_rn(x))]));
}

// The gated activations of the feed-forward block: gate = act(gate) · up.
struct SiluGate {
  __device__ float operator()(float g, float u) const { return g / (1.0f + expf(-g)) * u; }
};
struct GeluGate {
  const uint16_t* table;
  __device__ float operator()(float g, float u) const { return gelu_lookup(g, table) * u; }
};

template <typename Gate>
__global__ void gated_kernel(float* gate, const float* up, int64_t n, Gate act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    gate[i] = act(gate[i], up[i]);
  }
}

// The same, with each row also quantised for the down matmul (one launch instead of two): warp w of a
// block takes 256-value chunk blockIdx.x · warps + w of row blockIdx.y; each lane quantises the eight
// values it has just written.
template <typename Gate>
__global__ void gated_quantize_kernel(float* gate, const float* up, int width, Gate act, ActFormat f, int8_t* codes,
                                      float* scales) {
  const int64_t c = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (c * 256 >= width) return;  // whole warps only
  const int r = blockIdx.y, lane = threadIdx.x % 32;
  float* row = gate + int64_t(r) * width;
  const float* up_row = up + int64_t(r) * width;
  const int64_t k0 = c * 256 + 8 * lane;
#pragma unroll
  for (int j = 0; j < 8; ++j) row[k0 + j] = act(row[k0 + j], up_row[k0 + j]);
  quantize_chunk(f, row, width, c, lane, codes + int64_t(r) * width, scales + int64_t(r) * (width / 32));
}

__global__ void bias_gelu_kernel(float* x, const float* bias, int64_t n, int width, const uint16_t* table) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = bias ? x[i] + bias[i % width] : x[i];
    x[i] = gelu_lookup(v, table);
  }
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t n, int width) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    y[i] += bias[i % width];
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = cap * tanhf(x[i] / cap);
  }
}

__global__ void gather_kernel(const float* src, const int* index, int width, float* dst) {
  const int r = blockIdx.x;
  const float* sr = src + int64_t(index[r]) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) dst[int64_t(r) * width + i] = sr[i];
}

__global__ void scatter_kernel(const float* src, const int* index, int width, float* dst) {
  const int r = blockIdx.x;
  float* dr = dst + int64_t(index[r]) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) dr[i] = src[int64_t(r) * width + i];
}

__global__ void moe_combine_kernel(const float* y, const float* weight, int k, int width, float* out) {
  const int r = blockIdx.x;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    float o = 0.f;
    for (int j = 0; j < k; ++j) {
      const float v = y[(int64_t(r) * k + j) * width + i] * weight[int64_t(r) * k + j];
      o = j == 0 ? v : o + v;
    }
    out[int64_t(r) * width + i] = o;
  }
}

constexpr int kEltThreads = 256;
int elt_blocks(int64_t n) { return std::max(1, std::min(blocks_for(n, kEltThreads), 65535)); }

}  // namespace

void rmsnorm(const float* x, int64_t xs, const int* index, const float* w, float* out, int64_t os, int rows, int width,
             float eps, cudaStream_t s) {
  if (rows <= 0) return;
  // x is only read without a residual
  rmsnorm_kernel<<<rows, kNormThreads, 0, s>>>(const_cast<float*>(x), xs, index, nullptr, w, out, os, width, eps,
                                               ActFormat::None, nullptr, nullptr);
  check_launch("rmsnorm");
}

void add_rmsnorm(float* x, const float* residual, const float* w, float* out, int rows, int width, float eps,
                 ActScratch& act, ActFormat format, cudaStream_t s) {
  if (rows <= 0) return;
  format = fused_format(act, format, rows, width);
  rmsnorm_kernel<<<rows, kNormThreads, 0, s>>>(x, width, nullptr, residual, w, out, width, width, eps, format, act.codes,
                                               act.scales);
  check_launch("add_rmsnorm");
  mark_quantised(act, out, format, rows, width);
}

void layernorm(float* x, int rows, int width, const float* w, const float* b, float eps, cudaStream_t s) {
  if (rows <= 0) return;
  layernorm_kernel<<<rows, kNormThreads, 0, s>>>(x, width, w, b, eps);
  check_launch("layernorm");
}

void rope_store(float* q, int n_head, float* k, const float* v, int n_kv_head, int head_dim, const HeadNorms& norms,
                const float* cos, const float* sin, int half, bool neox, bool rotate, const PagedLayer& kv,
                const RowsView& rows, cudaStream_t s) {
  if (rows.rows <= 0) return;
  rope_store_kernel<<<dim3(unsigned(rows.rows), unsigned(n_head + n_kv_head)), 64, 0, s>>>(
      q, n_head, k, v, n_kv_head, head_dim, norms, cos, sin, half, neox, rotate && half > 0, kv, rows);
  check_launch("rope_store");
}

void attention(const float* q, float* out, const PagedLayer& kv, const RowsView& rows, int n_head, int n_kv_head,
               int head_dim, float scale, int window, cudaStream_t s) {
  if (head_dim > kMaxHeadDim) {
    throw std::invalid_argument("cuda attention: head_dim " + std::to_string(head_dim) + " exceeds " +
                                std::to_string(kMaxHeadDim));
  }
  if (rows.rows <= 0) return;
  attention_kernel<<<dim3(unsigned(rows.rows), unsigned(n_head)), kAttThreads, 0, s>>>(
      q, out, kv, rows, n_head, n_head / n_kv_head, head_dim, scale, window);
  check_launch("attention");
}

namespace {
template <typename Gate>
void gated(float* gate, const float* up, int rows, int width, Gate act, ActScratch& quantised, ActFormat format,
           cudaStream_t s) {
  if (rows <= 0) return;
  format = fused_format(quantised, format, rows, width);
  if (format == ActFormat::None) {
    const int64_t n = int64_t(rows) * width;
    gated_kernel<<<elt_blocks(n), kEltThreads, 0, s>>>(gate, up, n, act);
  } else {
    constexpr int kWarpsPerBlock = 4;
    const dim3 grid(unsigned((width / 256 + kWarpsPerBlock - 1) / kWarpsPerBlock), unsigned(rows));
    gated_quantize_kernel<<<grid, kWarpsPerBlock * 32, 0, s>>>(gate, up, width, act, format, quantised.codes,
                                                               quantised.scales);
  }
  check_launch("gated activation");
  mark_quantised(quantised, gate, format, rows, width);
}
}  // namespace

void swiglu(float* gate, const float* up, int rows, int width, ActScratch& act, ActFormat format, cudaStream_t s) {
  gated(gate, up, rows, width, SiluGate{}, act, format, s);
}

void geglu(float* gate, const float* up, int rows, int width, const uint16_t* table, ActScratch& act, ActFormat format,
           cudaStream_t s) {
  gated(gate, up, rows, width, GeluGate{table}, act, format, s);
}

void bias_gelu(float* x, const float* bias, int rows, int width, const uint16_t* table, cudaStream_t s) {
  const int64_t n = int64_t(rows) * width;
  bias_gelu_kernel<<<elt_blocks(n), kEltThreads, 0, s>>>(x, bias, n, width, table);
  check_launch("bias_gelu");
}

void add_bias(float* y, const float* bias, int rows, int width, cudaStream_t s) {
  if (!bias) return;
  const int64_t n = int64_t(rows) * width;
  add_bias_kernel<<<elt_blocks(n), kEltThreads, 0, s>>>(y, bias, n, width);
  check_launch("add_bias");
}

void add(float* x, const float* y, int64_t n, cudaStream_t s) {
  add_kernel<<<elt_blocks(n), kEltThreads, 0, s>>>(x, y, n);
  check_launch("add");
}

void softcap(float* x, int64_t n, float cap, cudaStream_t s) {
  softcap_kernel<<<elt_blocks(n), kEltThreads, 0, s>>>(x, n, cap);
  check_launch("softcap");
}

void gather_rows(const float* src, const int* index, int rows, int width, float* dst, cudaStream_t s) {
  if (rows <= 0) return;
  gather_kernel<<<rows, 256, 0, s>>>(src, index, width, dst);
  check_launch("gather_rows");
}

void scatter_rows(const float* src, const int* index, int rows, int width, float* dst, cudaStream_t s) {
  if (rows <= 0) return;
  scatter_kernel<<<rows, 256, 0, s>>>(src, index, width, dst);
  check_launch("scatter_rows");
}

void moe_combine(const float* y, const float* weight, int rows, int k, int width, float* out, cudaStream_t s) {
  if (rows <= 0) return;
  moe_combine_kernel<<<rows, 256, 0, s>>>(y, weight, k, width, out);
  check_launch("moe_combine");
}

}  // namespace infer::cuda
