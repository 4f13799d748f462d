// The GPU backend's kernels, as host functions that enqueue them on a stream. Every pointer is device
// memory. Each mirrors the CPU kernel of the same name (kernels/ops/ops.h) within rounding; the matmul keeps
// invariant 7: an output's arithmetic does not depend on the rows beside it or the batch size.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

namespace infer::cuda {

// How a matrix is stored on the GPU: F32, F16 and BF16 rows as the file stores them; Q8_0, Q4_K, Q5_K
// and Q6_K rows in the layout of block_layout.h (interleaved CPU layouts undone);
// the other quantised types dequantised once at load to F16.
enum class WeightKind : int { F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K };

struct GpuMatrix {
  WeightKind kind = WeightKind::F32;
  const void* data = nullptr;  // n_out rows of row_bytes
  int64_t n_in = 0, n_out = 0;
  int64_t row_bytes = 0;
  // Rows [first, first + count) as a matrix of their own (an expert of a stacked tensor).
  GpuMatrix rows(int64_t first, int64_t count) const;
};

// The activation format a weight layout's matmul reads: int8 codes with the CPU's quantisation for the
// block formats (Q8_K for the K-quants, Q8_0 for Q8_0), floats (None) for F32/F16/BF16.
enum class ActFormat { None, Q8_K, Q8_0 };
ActFormat act_format(WeightKind kind);

// Where a block-format matmul quantises its activation rows: `capacity` int8 codes and capacity / 32
// float scales, planned at load for the widest input and the most rows. A kernel that writes a
// matmul's input may quantise it there too (RMSNorm): it names the rows it wrote (quantised_*), and
// the next matmul of exactly those rows reads the codes instead of quantising them again.
struct ActScratch {
  int8_t* codes = nullptr;
  float* scales = nullptr;
  int64_t capacity = 0;
  const float* quantised_x = nullptr;
  ActFormat quantised_format = ActFormat::None;
  int64_t quantised_width = 0;
  int quantised_rows = 0;
};

// y[r][o] = Σ_k W[o][k] · x[r][k] for r < rows: one warp per output, lanes over k in a fixed pattern,
// then a fixed butterfly sum, so each output's bits are the same whatever `rows` is. Block formats
// quantise each row of x first (into `scratch`), as the CPU does for the same weight type.
void matmul(const GpuMatrix& w, const float* x, int64_t x_stride, int rows, float* y, int64_t y_stride,
            ActScratch& scratch, cudaStream_t s);
// The same for matrices that read the same rows x (q, k, v; gate, up): those with one layout and input
// width in one launch (fewer launches in a decode step); each output bitwise what matmul gives it.
struct MatmulOutput {
  GpuMatrix w;
  float* y;
  int64_t y_stride;
};
void matmul_shared(std::span<const MatmulOutput> outs, const float* x, int64_t x_stride, int rows,
                   ActScratch& scratch, cudaStream_t s);

// out row r = rmsnorm(x row (index ? index[r] : r)) · w (w may be null); sums of squares in double as
// on the CPU. out may be x when index is null.
void rmsnorm(const float* x, int64_t x_stride, const int* index, const float* w, float* out, int64_t out_stride,
             int rows, int width, float eps, cudaStream_t s);
// x += residual (when not null), then out = rmsnorm(x) · w, in one kernel (rows of `width`; out may be
// residual); with a format, out's rows are also quantised into `act` for the next matmul.
void add_rmsnorm(float* x, const float* residual, const float* w, float* out, int rows, int width, float eps,
                 ActScratch& act, ActFormat format, cudaStream_t s);
// In place: x row = (x − mean) / sqrt(var + eps) · w + b (bert), mean and variance in double.
void layernorm(float* x, int rows, int width, const float* w, const float* b, float eps, cudaStream_t s);

// The paged KV cache of one layer: page p's K rows start at k + p·page_stride (likewise v); token t of
// a row's sequence lives in page page_tables[pt_offset[row] + t / page_tokens] at row t % page_tokens.
struct PagedLayer {
  __half* k;
  __half* v;
  int64_t page_stride;  // halves
  int page_tokens;
  int kv_dim;
};
// Rows' positions and how far each sees: keys [window ? max(0, pos+1−window) : 0, end[r]).
struct RowsView {
  const int* pos;
  const int* end;
  const int* pt_offset;
  const int* page_tables;
  int rows;
};
// The q/k norms' weights (none when q is null): each q head is RMS-normalised with q, each k head with k.
struct HeadNorms {
  const float* q = nullptr;
  const float* k = nullptr;
  float eps = 0;
};
// In place, every q head and k head of every row: its q/k norm (when `norms` has them; sums of squares
// in double), then RoPE with the row's angles (half_rot cosines and sines; none when `rotate` is
// false); then each row's k and v stored at its position (F32 → F16, round to nearest even).
void rope_store(float* q, int n_head, float* k, const float* v, int n_kv_head, int head_dim, const HeadNorms& norms,
                const float* cos, const float* sin, int half_rot, bool neox, bool rotate, const PagedLayer& kv,
                const RowsView& rows, cudaStream_t s);
// Attention of every (row, head): softmax(q·Kᵀ·scale)·V over the row's visible keys, one pass with a
// running maximum. GQA: head h reads KV head h / (n_head / n_kv_head). head_dim ≤ 256.
void attention(const float* q, float* out, const PagedLayer& kv, const RowsView& rows, int n_head, int n_kv_head,
               int head_dim, float scale, int window, cudaStream_t s);

// Element-wise steps over n floats.
// gate = silu(gate) · up over rows of `width`; with a format, the rows are also quantised into `act`
// for the down matmul that reads them (as add_rmsnorm does for its matmul).
void swiglu(float* gate, const float* up, int rows, int width, ActScratch& act, ActFormat format, cudaStream_t s);
// gate = gelu(gate) · up through llama.cpp's f16 GELU table (kernels::gelu_table_entry, uploaded); as swiglu.
void geglu(float* gate, const float* up, int rows, int width, const uint16_t* gelu_table, ActScratch& act,
           ActFormat format, cudaStream_t s);
// x = gelu(x + bias) (bert's FFN; bias may be null).
void bias_gelu(float* x, const float* bias, int rows, int width, const uint16_t* gelu_table, cudaStream_t s);
void add_bias(float* y, const float* bias, int rows, int width, cudaStream_t s);
void add(float* x, const float* y, int64_t n, cudaStream_t s);  // x += y
void softcap(float* x, int64_t n, float cap, cudaStream_t s);  // x = cap · tanh(x / cap)

// dst row i = src row index[i] (width floats).
void gather_rows(const float* src, const int* index, int rows, int width, float* dst, cudaStream_t s);
// dst row index[i] = src row i.
void scatter_rows(const float* src, const int* index, int rows, int width, float* dst, cudaStream_t s);
// Mixture of experts: out row r = Σ_j weight[r·k + j] · y[(r·k + j)] summed in the order of the choices.
void moe_combine(const float* y, const float* weight, int rows, int k, int width, float* out, cudaStream_t s);

}  // namespace infer::cuda
