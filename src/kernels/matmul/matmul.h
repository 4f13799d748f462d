// y = x · Wᵀ for a weight matrix W (n_out rows of n_in elements, any supported type, usually a view
// into the mapped GGUF file) and a batch of activation rows x (F32).
//
// Invariant 7: every y[r][o] is computed with the same arithmetic and reduction order whatever the
// number of rows in the batch, the row's place in it and the thread count. Threads split output
// columns (weight rows), never a reduction; the multi-row kernel reuses each weight block across rows
// but accumulates each (row, output) pair exactly as the single-row kernel does. Tests check this bitwise.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/quant/quant.h"
#include "kernels/runtime/thread_pool.h"

namespace infer::kernels {

struct WeightMatrix {
  TensorType type;
  const void* data;  // n_out rows, each row_bytes long
  int64_t n_in;      // elements per row
  int64_t n_out;     // rows
  uint64_t row_bytes;
  bool interleaved = false;  // whole groups of 16 rows in the interleaved layout (interleave.h)
};

// Scratch owned by the caller, sized once per batch shape (no allocation in the hot path after warm-up).
struct MatmulScratch {
  std::vector<uint8_t> activations;  // quantised activation rows, from its first 64-byte boundary
};

// Writes rows [begin, end) of a matmul's input x just before they are quantised, on the thread that
// quantises them (the pool's threads share the rows): a row-wise step that feeds only this matmul
// (an RMSNorm, SwiGLU) then runs in parallel at no extra barrier.
using PrepareRows = std::function<void(int64_t begin, int64_t end)>;

// x: n_rows × n_in floats with row stride x_stride (elements); y: n_rows × n_out with stride y_stride.
void matmul(const WeightMatrix& w, const float* x, int64_t n_rows, int64_t x_stride, float* y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch, const PrepareRows& prepare = {});

// y_i = x · W_iᵀ for up to kMaxSharedOutputs matrices with the same n_in that read the same rows x
// (q, k and v; gate and up): one pool run, the activations quantised once when the matrices take the
// same activation format (else one run per matrix), and the chunks of all of them shared out, so
// the threads finish together. Each output is bitwise what matmul gives it alone.
inline constexpr int kMaxSharedOutputs = 4;
struct MatmulOutput {
  const WeightMatrix* w;
  float* y;          // n_rows × w->n_out
  int64_t y_stride;  // elements
};
void matmul_shared(std::span<const MatmulOutput> outputs, const float* x, int64_t n_rows, int64_t x_stride,
                   ThreadPool& pool, MatmulScratch& scratch, const PrepareRows& prepare = {});

// Activations are converted as quantize_activation_row does (bit for bit on both paths), so matmul and
// matmul_ref differ only in the f32 summation order of the dot products: |y − y_ref| stays within
// 1e-5 · Σ|w·x| of that output (tests/kernels). Throws std::invalid_argument for an unsupported type,
// a row_bytes that does not match n_in, or an interleaved matrix this CPU has no kernels for
// (matmul_shared also for matrices differing in n_in, or more than kMaxSharedOutputs). Runs on every
// thread of `pool`: whether a job is worth them is the caller's call (pool_policy.h); the scratch may be
// reused.
//
// Scalar reference with the same contract (single thread, dot_ref per element, row layout only);
// used by tests.
void matmul_ref(const WeightMatrix& w, const float* x, int64_t n_rows, int64_t x_stride, float* y,
                int64_t y_stride);

}  // namespace infer::kernels
