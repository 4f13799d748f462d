// y = x · Wᵀ: activations quantised once per call, then each thread walks its share of weight rows.
// Weight rows are taken a tile at a time (sized for L2) and each row of the tile is dotted with groups
// of kMaxRows activation rows, so a prefill reads each weight byte from memory once; a decode (one
// row) simply streams the rows.
#include "kernels/matmul.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/row_kernels.h"

namespace infer::kernels {

namespace {
constexpr uint64_t kTileBytes = 192 * 1024;  // weight bytes per tile: well inside a 512 KiB L2
constexpr int64_t kRowGranule = 16;          // weight rows per thread share are a multiple of this
// Below this much work (weight bytes × rows) waking the pool costs more than it saves (tiny models).
constexpr uint64_t kMinParallelBytes = 64 * 1024;

void check(const WeightMatrix& w) {
  if (!is_supported_weight_type(w.type)) {
    throw std::invalid_argument("matmul: unsupported weight type id " +
                                std::to_string(static_cast<uint32_t>(w.type)));
  }
  if (w.row_bytes != quant_row_bytes(w.type, w.n_in)) {
    throw std::invalid_argument("matmul: row_bytes " + std::to_string(w.row_bytes) + " does not match " +
                                std::to_string(w.n_in) + " elements of the weight type");
  }
}

struct MatmulJob {
  const WeightMatrix* w;
  RowKernels k;
  const float* x;
  int64_t n_rows, x_stride;
  float* y;
  int64_t y_stride;
  uint8_t* act;
  uint64_t act_row_bytes;
  int n_threads;

  void quantize(int thread) const {
    const Range r = split_range(n_rows, thread, n_threads);
    for (int64_t i = r.begin; i < r.end; ++i) k.quantize_act(x + i * x_stride, act + i * act_row_bytes, w->n_in);
  }

  void multiply(int thread) const {
    const Range cols = split_range(w->n_out, thread, n_threads, kRowGranule);
    const auto* wdata = static_cast<const uint8_t*>(w->data);
    const int64_t tile = std::max<int64_t>(1, static_cast<int64_t>(kTileBytes / w->row_bytes));
    for (int64_t o0 = cols.begin; o0 < cols.end; o0 += tile) {
      const int64_t o1 = std::min(cols.end, o0 + tile);
      for (int64_t r = 0; r < n_rows; r += kMaxRows) {
        const int nr = static_cast<int>(std::min<int64_t>(kMaxRows, n_rows - r));
        const uint8_t* a = act + r * act_row_bytes;
        float* out = y + r * y_stride;
        for (int64_t o = o0; o < o1; ++o) {
          k.dot_rows(w->n_in, wdata + o * w->row_bytes, a, act_row_bytes, nr, out + o, y_stride);
        }
      }
    }
  }
};
}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n_rows, int64_t x_stride, float* y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch) {
  check(w);
  if (n_rows <= 0) return;
  MatmulJob job{&w, row_kernels(w.type), x, n_rows, x_stride, y, y_stride, nullptr,
                0, pool.size()};
  job.act_row_bytes = job.k.act_row_bytes(w.n_in);
  const uint64_t need = job.act_row_bytes * static_cast<uint64_t>(n_rows);
  if (scratch.activations.size() < need) scratch.activations.resize(need);
  job.act = scratch.activations.data();
  if (n_rows < 2 * pool.size()) {
    for (int64_t i = 0; i < n_rows; ++i) job.k.quantize_act(x + i * x_stride, job.act + i * job.act_row_bytes, w.n_in);
  } else {
    pool.run([&job](int t) { job.quantize(t); });
  }
  if (pool.size() == 1 || w.row_bytes * w.n_out * static_cast<uint64_t>(n_rows) < kMinParallelBytes) {
    job.n_threads = 1;  // the split never changes results (invariant 7), only who computes them
    job.multiply(0);
  } else {
    pool.run([&job](int t) { job.multiply(t); });
  }
}

void matmul_ref(const WeightMatrix& w, const float* x, int64_t n_rows, int64_t x_stride, float* y,
                int64_t y_stride) {
  check(w);
  std::vector<uint8_t> act(activation_bytes(w.type, w.n_in));
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < n_rows; ++r) {
    quantize_activation_row(w.type, x + r * x_stride, act.data(), w.n_in);
    for (int64_t o = 0; o < w.n_out; ++o) {
      y[r * y_stride + o] = dot_ref(w.type, wdata + o * w.row_bytes, act.data(), w.n_in);
    }
  }
}

}  // namespace infer::kernels
