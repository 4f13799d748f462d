// y = x · Wᵀ: activations quantised once per call, then the threads take chunks of weight rows from a
// shared counter until none is left (a thread the OS has descheduled never holds up the others).
// A chunk of a prefill is an L2-sized tile of weight rows dotted with at most kChunkRows activation
// rows (the interleaved layout's and AMX kernels: all of them, so each weight byte comes from memory
// once); a decode (one row) streams its chunks.
// Who computes an output never changes its value (invariant 7): every (row, output) pair goes through
// the same kernel arithmetic.
#include "kernels/matmul/matmul.h"

#include <algorithm>
#include <atomic>
#include <span>
#include <stdexcept>
#include <string>

#include "kernels/runtime/claim_barrier.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/quant/interleave.h"
#include "kernels/matmul/batch_rows.h"
#include "kernels/matmul/kernel_plan.h"
#include "kernels/matmul/row_kernels.h"

namespace infer::kernels {

namespace {
constexpr uint64_t kTileBytes = 192 * 1024;   // prefill chunk: weight rows well inside a 512 KiB L2
// Decode chunk: about two per thread, so that a thread's streams run long before they are cut, and
// still two claims each to even out a slow start; clamped for tiny and huge matrices (infer bench
// decode; figures in docs/performance.md, "Constants").
constexpr uint64_t kMinStreamBytes = 128 * 1024, kMaxStreamBytes = 1024 * 1024;
constexpr int64_t kQuantizeChunkRows = 8;   // at most this many activation rows per quantising claim
// Large batches in the row layout: a chunk also takes at most this many activation rows, so that the
// threads' shares end together (a matrix of 5 chunks, or a thread that falls behind, left the other
// waiting at the barrier; infer bench pp512 on F16, Q8_0 and Q4_K_M, --embed on bge-base F16;
// docs/performance.md, "Prefill"). A multiple of every AVX2 tile's row group (3 float rows, 8 Q5 rows).
constexpr int64_t kChunkRows = 96;

uint64_t stream_chunk_bytes(const WeightMatrix& w, int threads) {
  const uint64_t total = w.row_bytes * static_cast<uint64_t>(w.n_out);
  return std::clamp<uint64_t>(total / (2 * static_cast<uint64_t>(threads)), kMinStreamBytes, kMaxStreamBytes);
}

// Batches on the kernels that unpack a group once for all the rows: twice the decode chunk, about one
// per thread, since each chunk starts its prefetch stream cold (infer serve-bench at 8 sequences;
// docs/performance.md, "Constants").
uint64_t batch_chunk_bytes(const WeightMatrix& w, int threads) { return 2 * stream_chunk_bytes(w, threads); }

// The job's quantised rows, from a cache-line boundary: the float tiles' 32-byte activation loads then
// never straddle two lines (bench_kernels BM_MatmulPrefill, F16 and F32).
uint8_t* activation_rows(MatmulScratch& scratch, uint64_t bytes) {
  constexpr uint64_t kLine = 64;
  if (scratch.activations.size() < bytes + kLine) scratch.activations.resize(bytes + kLine);
  const uint64_t misalign = reinterpret_cast<uintptr_t>(scratch.activations.data()) % kLine;
  return scratch.activations.data() + (kLine - misalign) % kLine;
}

void check(const WeightMatrix& w) {
  if (!is_supported_weight_type(w.type)) {
    throw std::invalid_argument("matmul: unsupported weight type id " +
                                std::to_string(static_cast<uint32_t>(w.type)));
  }
  if (w.row_bytes != quant_row_bytes(w.type, w.n_in)) {
    throw std::invalid_argument("matmul: row_bytes " + std::to_string(w.row_bytes) + " does not match " +
                                std::to_string(w.n_in) + " elements of the weight type");
  }
  if (w.interleaved && !interleaved_kernels_available(w.type)) {
    throw std::invalid_argument("matmul: this CPU has no kernels for the interleaved layout of weight type id " +
                                std::to_string(static_cast<uint32_t>(w.type)));
  }
}

// One weight matrix of a job: its kernels, output and chunk size. Reads the job's quantised rows.
struct MatmulPart {
  const WeightMatrix* w;
  RowKernels k;
  float* y;
  int64_t y_stride;
  int64_t chunk_outputs;  // weight rows per chunk
  int64_t first_chunk;    // index of its first chunk among the job's
  const uint8_t* act;
  uint64_t act_row_bytes;
  int64_t n_rows;
  int64_t chunk_rows;  // activation rows per chunk: n_rows unless the batch is split too

  int64_t row_chunks() const { return (n_rows + chunk_rows - 1) / chunk_rows; }
  int64_t n_chunks() const { return (w->n_out + chunk_outputs - 1) / chunk_outputs * row_chunks(); }

  // Chunk c of this matrix: a range of its weight rows times a range of the activation rows. The
  // chunks of one range of weight rows are consecutive, so neighbouring claims read the same weights.
  void multiply_chunk(int64_t c) const {
    const int64_t o0 = c / row_chunks() * chunk_outputs, r0 = c % row_chunks() * chunk_rows;
    with_rows(r0, std::min(n_rows, r0 + chunk_rows)).multiply_outputs(o0, std::min(w->n_out, o0 + chunk_outputs));
  }

  // The same part over activation rows [r0, r1) only.
  MatmulPart with_rows(int64_t r0, int64_t r1) const {
    MatmulPart p = *this;
    p.act = act + r0 * act_row_bytes;
    p.y = y + r0 * y_stride;
    p.n_rows = r1 - r0;
    return p;
  }

  // Weight rows [o0, o1): whole interleaved groups by their kernels, the rest by the row layout's.
  void multiply_outputs(int64_t o0, int64_t o1) const {
    const int64_t grouped_end = w->interleaved ? std::min(o1, w->n_out / kInterleaveRows * kInterleaveRows) : o0;
    if (grouped_end > o0) {
      multiply_interleaved(o0, grouped_end);
      o0 = grouped_end;
    }
    if (o0 < o1) multiply_row_layout(o0, o1);
  }

  // o0 and o1 on group boundaries.
  void multiply_interleaved(int64_t o0, int64_t o1) const {
    run(plan_matmul(k, w->type, true, n_rows), static_cast<const uint8_t*>(w->data) + o0 * w->row_bytes, o1 - o0,
        y + o0);
  }

  void multiply_row_layout(int64_t o0, int64_t o1) const {
    run(plan_matmul(k, w->type, false, n_rows), static_cast<const uint8_t*>(w->data) + o0 * w->row_bytes, o1 - o0,
        y + o0);
  }

  // The plan's kernel over n_w weight rows from wdata into out (this part's activation rows).
  void run(const KernelPlan& plan, const uint8_t* wdata, int64_t n_w, float* out) const {
    switch (plan.call) {
      case KernelCall::kOutputsPerRow:
        for (int64_t r = 0; r < n_rows; ++r) {
          plan.outputs(w->n_in, wdata, w->row_bytes, n_w, act + r * act_row_bytes, out + r * y_stride);
        }
        return;
      case KernelCall::kTile:
        plan.tile(w->n_in, wdata, w->row_bytes, n_w, act, act_row_bytes, static_cast<int>(n_rows), out, y_stride);
        return;
      case KernelCall::kRowsByFour:
        for (int64_t r = 0; r < n_rows; r += kMaxRows) {
          const int nr = static_cast<int>(std::min<int64_t>(kMaxRows, n_rows - r));
          for (int64_t o = 0; o < n_w; ++o) {
            plan.rows(w->n_in, wdata + o * w->row_bytes, act + r * act_row_bytes, act_row_bytes, nr,
                      out + r * y_stride + o, y_stride);
          }
        }
        return;
    }
  }
};

// One pool job over 1..kMaxSharedOutputs matrices that read the same activation rows: the threads
// quantise the rows (claimed `claim` at a time), wait until every row is done, then share out the
// chunks of all the matrices from one counter. One barrier per job, no serial quantisation of a few
// rows while the other threads wait, and matrices sharing an input (q, k, v) end together instead of
// each waiting for its slowest thread.
struct MatmulJob {
  MatmulPart parts[kMaxSharedOutputs];
  int n_parts = 0;
  int64_t n_chunks = 0;
  QuantizeActFn quantize_act;
  const PrepareRows* prepare = nullptr;  // writes rows of x before they are quantised, if set
  const float* x;
  int64_t n_in, n_rows, x_stride;
  uint8_t* act;
  uint64_t act_row_bytes;
  ClaimBarrier quantized;  // rows quantised
  alignas(64) std::atomic<int64_t> next_chunk{0};

  void quantize_rows(int64_t begin, int64_t end) const {
    if (prepare && *prepare) (*prepare)(begin, end);
    for (int64_t i = begin; i < end; ++i) quantize_act(x + i * x_stride, act + i * act_row_bytes, n_in);
  }

  void quantize_then_multiply(int64_t claim) {
    quantized.run(n_rows, claim, [this](int64_t begin, int64_t end) { quantize_rows(begin, end); });
    multiply();
  }

  void multiply() {
    for (;;) {
      const int64_t c = next_chunk.fetch_add(1);
      if (c >= n_chunks) return;
      int i = 0;
      while (c >= parts[i].first_chunk + parts[i].n_chunks()) ++i;
      parts[i].multiply_chunk(c - parts[i].first_chunk);
    }
  }
};
}  // namespace

void matmul_shared(std::span<const MatmulOutput> outputs, const float* x, int64_t n_rows, int64_t x_stride,
                   ThreadPool& pool, MatmulScratch& scratch, const PrepareRows& prepare) {
  if (outputs.empty()) return;
  if (outputs.size() > size_t(kMaxSharedOutputs)) {
    throw std::invalid_argument("matmul_shared: at most " + std::to_string(kMaxSharedOutputs) + " matrices");
  }
  for (const MatmulOutput& o : outputs) check(*o.w);
  if (n_rows <= 0) return;
  const RowKernels first = row_kernels(outputs[0].w->type);
  const int64_t n_in = outputs[0].w->n_in;
  for (const MatmulOutput& o : outputs) {
    if (o.w->n_in != n_in) throw std::invalid_argument("matmul_shared: the matrices differ in n_in");
    const RowKernels k = row_kernels(o.w->type);
    if (k.quantize_act != first.quantize_act || k.act_row_bytes(n_in) != first.act_row_bytes(n_in)) {
      if (prepare) prepare(0, n_rows);  // activation formats differ: one job per matrix
      for (const MatmulOutput& each : outputs) {
        matmul_shared(std::span<const MatmulOutput>(&each, 1), x, n_rows, x_stride, pool, scratch);
      }
      return;
    }
  }

  MatmulJob job;
  job.prepare = &prepare;
  job.quantize_act = first.quantize_act;
  job.x = x;
  job.n_in = n_in;
  job.n_rows = n_rows;
  job.x_stride = x_stride;
  job.act_row_bytes = first.act_row_bytes(n_in);
  job.act = activation_rows(scratch, job.act_row_bytes * static_cast<uint64_t>(n_rows));
  for (const MatmulOutput& o : outputs) {
    const WeightMatrix& w = *o.w;
    MatmulPart& p = job.parts[job.n_parts++];
    p = MatmulPart{&w, row_kernels(w.type), o.y, o.y_stride, 0, job.n_chunks, job.act, job.act_row_bytes,
                   n_rows, n_rows};
    // The tile kernels and the interleaved layout's kernels unpack each group of weight rows once per
    // call for all of the call's rows, whatever the chunk: they take the decode chunks too, which split
    // small matrices evenly between the threads (192 KiB tiles gave a 576 KiB matrix 2 chunks to one
    // thread and 1 to the other).
    const bool whole_batch = (p.k.dot_tile || w.interleaved) && n_rows > batch_rows::kDecodeKernelUpTo;
    // The AVX2 register tiles block for the caches inside a chunk and start no prefetch streams: they
    // keep the decode chunks, so that a thread the OS deschedules holds less of the batch (bench_kernels
    // BM_MatmulPrefill, infer bench pp512 on Q8_0; docs/performance.md, "Prefill").
    const bool amx_tile = p.k.dot_tile && use_amx() && p.k.dot_tile == amx_dot_tile(w.type);
    uint64_t chunk_bytes = kTileBytes;
    if (whole_batch && n_rows > kMaxRows && (w.interleaved || amx_tile)) {
      chunk_bytes = batch_chunk_bytes(w, pool.size());  // each chunk unpacks its groups once for all rows
    } else {
      p.chunk_rows = std::min(n_rows, kChunkRows);
      if (whole_batch || n_rows <= kMaxRows) chunk_bytes = stream_chunk_bytes(w, pool.size());
    }
    p.chunk_outputs = std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes / w.row_bytes));
    // The AMX kernels work on groups of 16 weight rows too (a short group costs a whole tile product).
    if (w.interleaved || amx_tile) {
      p.chunk_outputs = (p.chunk_outputs + kInterleaveRows - 1) / kInterleaveRows * kInterleaveRows;
    }
    job.n_chunks += p.n_chunks();
  }

  if (pool.size() == 1) {  // the caller judged the job too small for the pool (pool_policy.h)
    job.quantize_rows(0, n_rows);
    job.multiply();
    return;
  }
  const int64_t claim = std::clamp<int64_t>(n_rows / (2 * pool.size()), 1, kQuantizeChunkRows);
  pool.run([&job, claim](int) { job.quantize_then_multiply(claim); });
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_rows, int64_t x_stride, float* y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch, const PrepareRows& prepare) {
  const MatmulOutput output{&w, y, y_stride};
  matmul_shared(std::span<const MatmulOutput>(&output, 1), x, n_rows, x_stride, pool, scratch, prepare);
}

void matmul_ref(const WeightMatrix& w, const float* x, int64_t n_rows, int64_t x_stride, float* y,
                int64_t y_stride) {
  check(w);
  if (w.interleaved) throw std::invalid_argument("matmul_ref: the reference reads the row layout only");
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
