// The forward pass over a batch of (sequence, position, token) rows, llama2.c-style: one function that
// reads like the math (spec/architectures.md §4), with the llama / qwen2 / qwen3 differences as a few
// guarded lines (biases, q/k norm, RoPE pairing). Matmuls take all rows at once so that weights are
// read once per step; attention runs per row through each sequence's page table.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>

#include "kernels/interleave.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/model.h"

namespace infer::model {
namespace {

// Below this many multiply-adds a matmul runs on the calling thread alone: waking the pool costs more
// than the work (stories260K's 64×64 matrices).
constexpr int64_t kMinParallelWork = int64_t(1) << 20;
// The same for a batch's attention, whose keys come from memory at a few GB/s per thread, so even one
// or two decode rows gain from the pool (infer serve-bench --profile; docs/performance.md, "Constants").
constexpr int64_t kMinParallelAttention = int64_t(1) << 16;

// The attention of one layer for every row of a batch, in two phases. First each row's q/k norms, RoPE
// and K/V store (`prepare_row`), rows claimed one at a time by whichever thread is free; every thread
// then waits until all rows are stored, since a prefill row attends to the rows before it. A claimed
// row is always finished by its claimant (even when it throws), so the wait ends even if a thread
// never starts. (In the job rather than on the calling thread before it, so that both threads work:
// serve-bench --profile.)
// Then the tasks: (row, KV head) pairs, dealt to the threads round-robin: rows late in a prefill have
// more keys, so contiguous shares would be uneven. Tasks run KV head by KV head, so that a thread
// reads one head's keys and values for many rows in a row and finds them in L2 (row-major order
// cycled through all heads: 2,050-token prefill 17.3 s).
// The job is captured by one pointer so that handing it to the pool allocates nothing.
struct AttentionJob {
  const Batch* batch;
  KvPool* kv;
  int layer;
  std::vector<float>* q;
  std::vector<float>* out;
  std::vector<std::vector<float>>* scratch;  // per thread
  int q_dim, head_dim, n_kv_head, n_gqa;
  float scale;
  int n_threads;
  const std::function<void(int layer, int row)>* prepare_row;
  mutable std::atomic<int> next_row{0};
  mutable std::atomic<int> rows_ready{0};

  void prepare_rows() const {
    const int n_rows = int(batch->rows.size());
    for (int r = next_row.fetch_add(1); r < n_rows; r = next_row.fetch_add(1)) {
      try {
        (*prepare_row)(layer, r);
      } catch (...) {
        rows_ready.fetch_add(1, std::memory_order_release);
        throw;
      }
      rows_ready.fetch_add(1, std::memory_order_release);
    }
    while (rows_ready.load(std::memory_order_acquire) < n_rows) __builtin_ia32_pause();
  }

  void run(int t) const {
    prepare_rows();
    const int64_t n_tasks = int64_t(batch->rows.size()) * n_kv_head;
    float* s = (*scratch)[size_t(t)].data();
    const int64_t n_rows = int64_t(batch->rows.size());
    for (int64_t task = t; task < n_tasks; task += n_threads) {
      const int r = int(task % n_rows), g = int(task / n_rows);
      const BatchRow& row = batch->rows[size_t(r)];
      kernels::PagedKv view = kv->view(layer, batch->seqs[size_t(row.seq)].page_table);
      view.k_base += int64_t(g) * head_dim;  // KV head g; rows keep their kv_dim stride
      view.v_base += int64_t(g) * head_dim;
      const size_t at = size_t(int64_t(r) * q_dim + int64_t(g) * n_gqa * head_dim);
      kernels::attention_row(&(*q)[at], view, row.pos + 1, n_gqa, 1, head_dim, scale, &(*out)[at], s);
    }
  }
};

// Validates every row against the model, the pool and the sequences' page tables, and lists the rows
// that want outputs: the want_logits rows first (the classifier reads them as one block), then the
// hidden-only rows. Returns how many want logits. Throws std::out_of_range / std::invalid_argument
// naming the row and the problem.
int check_batch(const HParams& hp, const Batch& batch, const KvPool& kv, int max_rows, std::vector<int>& out_rows) {
  const int n = int(batch.rows.size());
  if (n > max_rows) {
    throw std::invalid_argument("forward: batch of " + std::to_string(n) + " rows exceeds max_rows " +
                                std::to_string(max_rows));
  }
  if (kv.kv_dim() != hp.kv_dim() || kv.page_stride() != KvPool::page_stride_for(hp, kv.page_tokens())) {
    throw std::invalid_argument("forward: KV pool was built for another model shape");
  }
  out_rows.clear();
  for (int r = 0; r < n; ++r) {
    const BatchRow& row = batch.rows[size_t(r)];
    auto where = [r] { return "forward: row " + std::to_string(r) + ": "; };  // built only on error
    if (row.token < 0 || row.token >= hp.n_vocab) {
      throw std::out_of_range(where() + "token id " + std::to_string(row.token) + " out of range [0, " +
                              std::to_string(hp.n_vocab) + ")");
    }
    if (row.pos < 0 || row.pos >= hp.n_ctx_train) {
      throw std::out_of_range(where() + "position " + std::to_string(row.pos) + " out of the context [0, " +
                              std::to_string(hp.n_ctx_train) + ")");
    }
    if (row.seq < 0 || row.seq >= int(batch.seqs.size())) {
      throw std::out_of_range(where() + "sequence index " + std::to_string(row.seq) + " out of range");
    }
    const SeqPages& sp = batch.seqs[size_t(row.seq)];
    const int last_page = row.pos / kv.page_tokens();
    if (!sp.page_table || last_page >= sp.n_pages) {
      throw std::out_of_range(where() + "position " + std::to_string(row.pos) + " is past the sequence's " +
                              std::to_string(sp.n_pages) + " KV pages");
    }
    for (int p = 0; p <= last_page; ++p) {
      if (sp.page_table[p] < 0 || sp.page_table[p] >= kv.n_pages()) {
        throw std::out_of_range(where() + "page table entry " + std::to_string(p) + " = " +
                                std::to_string(sp.page_table[p]) + " is not a page of the pool");
      }
    }
    if (row.want_logits) out_rows.push_back(r);
  }
  const int n_logits = int(out_rows.size());
  for (int r = 0; r < n; ++r) {
    const BatchRow& row = batch.rows[size_t(r)];
    if (row.want_hidden && !row.want_logits) out_rows.push_back(r);
  }
  return n_logits;
}

}  // namespace

struct Forward::Buffers {
  // Activations, one row per batch row (row stride in floats given by the width).
  std::vector<float> x;     // residual stream      [max_rows × n_embd]
  std::vector<float> xb;    // normed / branch out  [max_rows × n_embd]
  std::vector<float> q;     // queries              [max_rows × q_dim]
  std::vector<float> k, v;  // this step's keys/values [max_rows × kv_dim]
  std::vector<float> att;   // attention output     [max_rows × q_dim]
  std::vector<float> hb, hb2;  // FFN hidden         [max_rows × n_ff]
  std::vector<float> final_rows;  // final-normed rows that want outputs [max_rows × n_embd]
  std::vector<float> rope_cos, rope_sin;  // per row, n_rot/2 each
  std::vector<std::vector<float>> att_scratch;  // per thread: scores over up to n_ctx_train keys
  std::vector<int> out_rows;  // indices of output rows: want_logits ones, then want_hidden-only ones
  kernels::MatmulScratch mm;
  kernels::ThreadPool solo{1};
};

Forward::Forward(const Model& model, kernels::ThreadPool& pool, int max_rows)
    : model_(model), pool_(pool), max_rows_(max_rows), buf_(std::make_unique<Buffers>()) {
  if (max_rows <= 0) throw std::invalid_argument("Forward: max_rows must be positive");
  const HParams& hp = model.hparams();
  const size_t R = size_t(max_rows);
  Buffers& b = *buf_;
  b.x.resize(R * hp.n_embd);
  b.xb.resize(R * hp.n_embd);
  b.q.resize(R * hp.q_dim());
  b.k.resize(R * hp.kv_dim());
  b.v.resize(R * hp.kv_dim());
  b.att.resize(R * hp.q_dim());
  b.hb.resize(R * hp.n_ff);
  b.hb2.resize(R * hp.n_ff);
  b.final_rows.resize(R * hp.n_embd);
  b.rope_cos.resize(R * (hp.n_rot / 2));
  b.rope_sin.resize(R * (hp.n_rot / 2));
  b.att_scratch.resize(size_t(pool.size()));
  // attention_row needs n_gqa score rows of up to n_ctx_train keys
  for (auto& s : b.att_scratch) s.resize(size_t(hp.n_head / hp.n_kv_head) * size_t(hp.n_ctx_train));
  b.out_rows.reserve(R);
}

Forward::~Forward() = default;

uint64_t Forward::scratch_bytes(const HParams& hp, int max_rows, int n_threads) {
  const uint64_t rows = uint64_t(std::max(max_rows, 0));
  // One row each of: x, xb, final_rows (n_embd); q, att (q_dim); k, v (kv_dim); hb, hb2 (n_ff); rope.
  const uint64_t per_row = 3 * uint64_t(hp.n_embd) + 2 * uint64_t(hp.q_dim()) + 2 * uint64_t(hp.kv_dim()) +
                           2 * uint64_t(hp.n_ff) + uint64_t(hp.n_rot);
  const uint64_t gqa = hp.n_kv_head > 0 ? uint64_t(hp.n_head / hp.n_kv_head) : 1;
  const uint64_t scores = uint64_t(std::max(n_threads, 1)) * gqa * uint64_t(std::max(hp.n_ctx_train, 0));
  // Quantised activations: under two bytes per input element of the widest matmul input.
  const uint64_t activations = rows * 2 * uint64_t(std::max(hp.n_embd, hp.n_ff));
  return (rows * per_row + scores) * sizeof(float) + activations;
}

void Forward::run(const Batch& batch, KvPool& kv, float* logits, float* hidden, PassProfile* profile) {
  // lap(&PassProfile::x) adds the time since the previous lap to phase x; nothing without a profile.
  using Clock = std::chrono::steady_clock;
  Clock::time_point lap_start = profile ? Clock::now() : Clock::time_point{};
  auto lap = [&](double PassProfile::*phase) {
    if (!profile) return;
    const Clock::time_point now = Clock::now();
    profile->*phase += std::chrono::duration<double>(now - lap_start).count();
    lap_start = now;
  };
  const HParams& hp = model_.hparams();
  const Model& m = model_;
  Buffers& b = *buf_;
  const int n = int(batch.rows.size());
  const int E = hp.n_embd, Q = hp.q_dim(), KV = hp.kv_dim(), F = hp.n_ff, HD = hp.head_dim;
  const int half_rot = hp.n_rot / 2;

  // bad input is an exception, never a wild write
  const int n_logit_rows = check_batch(hp, batch, kv, max_rows_, b.out_rows);
  if (!b.out_rows.empty() && !logits && !hidden) {
    throw std::invalid_argument("forward: rows want outputs but no logits or hidden buffer was given");
  }
  if (int(b.out_rows.size()) > n_logit_rows && !hidden) {
    throw std::invalid_argument("forward: rows want hidden states but no hidden buffer was given");
  }
  if (n == 0) return;

  auto mm_pool = [&](const kernels::WeightMatrix& w, int rows) -> kernels::ThreadPool& {
    return int64_t(rows) * w.n_in * w.n_out < kMinParallelWork ? b.solo : pool_;
  };
  auto matmul = [&](const kernels::WeightMatrix& w, const float* in, float* out, int rows,
                    const kernels::PrepareRows& prepare = {}) {
    kernels::matmul(w, in, rows, w.n_in, out, w.n_out, mm_pool(w, rows), b.mm, prepare);
  };
  // Matrices reading the same input (q, k, v; gate, up): one pool run for all of them.
  auto matmul_shared = [&](std::initializer_list<kernels::MatmulOutput> outputs, const float* in, int rows,
                           const kernels::PrepareRows& prepare) {
    int64_t work = 0;
    for (const kernels::MatmulOutput& o : outputs) work += int64_t(rows) * o.w->n_in * o.w->n_out;
    kernels::ThreadPool& pool = work < kMinParallelWork ? b.solo : pool_;
    kernels::matmul_shared(std::span<const kernels::MatmulOutput>(outputs.begin(), outputs.size()), in, rows,
                           outputs.begin()->w->n_in, pool, b.mm, prepare);
  };
  // Row-wise steps that feed one matmul run inside it, on the rows each thread quantises. They reach
  // their state through one pointer, so that the std::functions are made once and allocate nothing.
  struct RowSteps {
    Buffers* b;
    int E, F;
    float eps;
    const float* norm;  // this layer's RMSNorm weight
  } steps{&b, E, F, hp.rms_eps, nullptr};
  const kernels::PrepareRows norm_rows = [s = &steps](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      kernels::rmsnorm(&s->b->x[size_t(r) * s->E], s->norm, &s->b->xb[size_t(r) * s->E], s->E, s->eps);
    }
  };
  const kernels::PrepareRows swiglu_rows = [s = &steps](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* gate = &s->b->hb[size_t(r) * s->F];
      kernels::swiglu(gate, &s->b->hb2[size_t(r) * s->F], gate, s->F);
    }
  };
  auto add_bias = [&](float* y, const float* bias, int width) {
    if (!bias) return;
    for (int r = 0; r < n; ++r) {
      float* yr = y + int64_t(r) * width;
      for (int i = 0; i < width; ++i) yr[i] += bias[i];
    }
  };
  auto residual = [&](float* x, const float* add, int width) {
    for (int64_t i = 0; i < int64_t(n) * width; ++i) x[i] += add[i];
  };

  const kernels::RopeParams rope{hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale, hp.rope_neox, m.rope_freqs()};
  const float att_scale = 1.0f / std::sqrt(float(HD));

  // ---- token embedding, and each row's RoPE angles (shared by all layers and heads) ----
  const kernels::WeightMatrix& emb = m.token_embd();
  for (int r = 0; r < n; ++r) {
    const BatchRow& row = batch.rows[size_t(r)];
    kernels::dequantize_weight_row(emb, row.token, &b.x[size_t(r) * E]);
    kernels::rope_angles(row.pos, rope, &b.rope_cos[size_t(r) * half_rot], &b.rope_sin[size_t(r) * half_rot]);
  }

  int64_t att_work = 0;  // multiply-adds of this batch's attention, to decide whether to use the pool
  for (const BatchRow& row : batch.rows) att_work += int64_t(row.pos + 1) * Q * 2;
  kernels::ThreadPool& att_pool = att_work < kMinParallelAttention ? b.solo : pool_;
  const int n_gqa = hp.n_head / hp.n_kv_head;

  // Per row after the q, k, v matmuls: q/k RMSNorm (qwen3), RoPE (adjacent pairs for llama, half-split
  // NeoX for qwen2/qwen3), then k and v into the row's pages. Runs inside the attention job.
  const std::function<void(int, int)> finish_qkv_row = [&](int layer, int r) {
    const LayerWeights& L = m.layers()[size_t(layer)];
    const int Q = hp.q_dim(), KV = hp.kv_dim(), HD = hp.head_dim, half_rot = hp.n_rot / 2;
    float* qr = &b.q[size_t(r) * Q];
    float* kr = &b.k[size_t(r) * KV];
    if (L.q_norm) {
      for (int h = 0; h < hp.n_head; ++h) kernels::rmsnorm(qr + h * HD, L.q_norm, qr + h * HD, HD, hp.rms_eps);
      for (int h = 0; h < hp.n_kv_head; ++h) kernels::rmsnorm(kr + h * HD, L.k_norm, kr + h * HD, HD, hp.rms_eps);
    }
    const float* c = &b.rope_cos[size_t(r) * half_rot];
    const float* sn = &b.rope_sin[size_t(r) * half_rot];
    for (int h = 0; h < hp.n_head; ++h) kernels::rope_apply(qr + h * HD, c, sn, rope);
    for (int h = 0; h < hp.n_kv_head; ++h) kernels::rope_apply(kr + h * HD, c, sn, rope);
    const BatchRow& row = batch.rows[size_t(r)];
    kernels::kv_store(kr, &b.v[size_t(r) * KV], kv.k_base(layer), kv.v_base(layer), kv.page_stride(),
                      kv.page_tokens(), batch.seqs[size_t(row.seq)].page_table, KV, row.pos);
  };

  lap(&PassProfile::other_s);
  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& L = m.layers()[size_t(l)];

    // attention rmsnorm, then the qkv matmuls (+ biases: qwen2)
    steps.norm = L.attn_norm;
    matmul_shared({{&L.wq, b.q.data(), L.wq.n_out}, {&L.wk, b.k.data(), L.wk.n_out}, {&L.wv, b.v.data(), L.wv.n_out}},
                  b.xb.data(), n, norm_rows);
    add_bias(b.q.data(), L.bq, Q);
    add_bias(b.k.data(), L.bk, KV);
    add_bias(b.v.data(), L.bv, KV);
    lap(&PassProfile::qkv_s);

    // multihead attention over (row, KV head) tasks, after each row's q/k norms, RoPE and K/V store;
    // each task is computed whole by one thread, so its result does not depend on the split
    // (invariant 7)
    const AttentionJob job{&batch, &kv, l, &b.q, &b.att, &b.att_scratch, Q, HD, hp.n_kv_head, n_gqa, att_scale,
                           att_pool.size(), &finish_qkv_row};
    att_pool.run([&job](int t) { job.run(t); });
    lap(&PassProfile::attention_s);

    // output projection and residual
    matmul(L.wo, b.att.data(), b.xb.data(), n);
    residual(b.x.data(), b.xb.data(), E);
    lap(&PassProfile::output_s);

    // ffn rmsnorm; SwiGLU: down(silu(gate·h) ⊙ up·h), then residual
    steps.norm = L.ffn_norm;
    matmul_shared({{&L.w_gate, b.hb.data(), L.w_gate.n_out}, {&L.w_up, b.hb2.data(), L.w_up.n_out}}, b.xb.data(), n,
                  norm_rows);
    lap(&PassProfile::ffn_up_s);
    matmul(L.w_down, b.hb.data(), b.xb.data(), n, swiglu_rows);
    residual(b.x.data(), b.xb.data(), E);
    lap(&PassProfile::ffn_down_s);
  }

  // final rmsnorm, only for the rows that want outputs (gathered so that the classifier reads its
  // weights once for all of them)
  const int n_out = int(b.out_rows.size());
  if (n_out == 0) return;
  for (int i = 0; i < n_out; ++i) {
    kernels::rmsnorm(&b.x[size_t(b.out_rows[size_t(i)]) * E], m.output_norm(), &b.final_rows[size_t(i) * E], E,
                     hp.rms_eps);
  }
  if (hidden) std::memcpy(hidden, b.final_rows.data(), sizeof(float) * size_t(n_out) * E);

  // classifier, over the leading want_logits rows only
  if (logits && n_logit_rows > 0) {
    const kernels::WeightMatrix& out = m.output();
    kernels::matmul(out, b.final_rows.data(), n_logit_rows, E, logits, hp.n_vocab, mm_pool(out, n_logit_rows), b.mm);
    if (const float* bias = m.output_bias()) {
      for (int i = 0; i < n_logit_rows; ++i) {
        float* lr = logits + int64_t(i) * hp.n_vocab;
        for (int j = 0; j < hp.n_vocab; ++j) lr[j] += bias[j];
      }
    }
  }
  lap(&PassProfile::classifier_s);
}

}  // namespace infer::model
