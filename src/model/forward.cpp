// The forward pass over a batch of (sequence, position, token) rows, llama2.c-style: Forward::run reads
// like the math (spec/architectures.md §4, architectures-more.md): embed the tokens, then per layer the
// attention and the feed-forward block, then the outputs, each step as the layer's description says
// (layer_recipe.h: norm placement, q/k norms, RoPE, sliding window, post-norms, the feed-forward's
// kind) and biases wherever the file has them; no step asks which architecture it runs. Matmuls take
// all rows at once so that weights are read once per step; attention runs per row through each
// sequence's page table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>

#include "kernels/runtime/claim_barrier.h"
#include "kernels/quant/interleave.h"
#include "kernels/ops/ops.h"
#include "kernels/runtime/pool_policy.h"
#include "kernels/quant/quant.h"
#include "model/batch_check.h"
#include "model/embedding.h"
#include "model/model.h"
#include "model/moe_routing.h"

namespace infer::model {
namespace {

// Rows of an attention block: enough that a block has at least 24 query vectors (rows × a KV head's
// query heads) to share each key's and value's loads (BM_AttentionRowsPrefill).
constexpr int kAttentionBlockVectors = 24;
constexpr int attention_block_rows(int n_gqa) { return std::max(1, (kAttentionBlockVectors + n_gqa - 1) / n_gqa); }
constexpr int kAttentionBlockRows = attention_block_rows(1);  // the most

// The keys row r of a batch attends to: causal, its sequence's positions up to its own (a local
// layer's window keeps the last `window` of them); non-causal (seq_end given: bert), every position of
// its sequence.
struct RowKeys {
  int begin, end;
};
RowKeys row_keys(const Batch& batch, int r, int window, const std::vector<int>* seq_end) {
  const BatchRow& row = batch.rows[size_t(r)];
  return {window > 0 ? std::max(0, row.pos + 1 - window) : 0, seq_end ? (*seq_end)[size_t(row.seq)] : row.pos + 1};
}

// The attention of one layer for every row of a batch, in two phases. First each row's q/k norms, RoPE
// and K/V store (`prepare_row`), rows claimed one at a time by whichever thread is free; every thread
// then waits until all rows are stored, since a prefill row attends to the rows before it
// (kernels::ClaimBarrier). (In the job rather than on the calling thread before it, so that both
// threads work: serve-bench --profile.)
// Then the tasks: (block of rows, KV head) pairs, dealt to the threads round-robin: rows late in a
// prefill have more keys, so contiguous shares would be uneven. A block is consecutive rows of one
// sequence at consecutive positions, which share their key and value loads (kernels::attention_rows).
// Tasks run KV head by KV head, so that a thread reads one head's keys and values for many rows in a
// row and finds them in L2 (a long prefill; docs/performance.md, Constants).
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
  int window;                   // a local layer's sliding window (keys pos-window+1..pos), or 0
  const std::vector<int>* seq_end;  // non-causal: each sequence's last position in the batch + 1; else null
  const std::vector<int>* blocks;   // each block's first row, then the number of rows
  int n_threads;
  const std::function<void(int layer, int row)>* prepare_row;
  mutable kernels::ClaimBarrier prepared{};

  void prepare_rows() const {
    prepared.run(int64_t(batch->rows.size()), 1, [this](int64_t r, int64_t) { (*prepare_row)(layer, int(r)); });
  }

  void run(int t) const {
    prepare_rows();
    const int64_t n_blocks = int64_t(blocks->size()) - 1;
    const int64_t n_tasks = n_blocks * n_kv_head;
    float* s = (*scratch)[size_t(t)].data();
    int key_begin[kAttentionBlockRows], key_end[kAttentionBlockRows];
    for (int64_t task = t; task < n_tasks; task += n_threads) {
      const int block = int(task % n_blocks), g = int(task / n_blocks);
      const int r0 = (*blocks)[size_t(block)], n_rows = (*blocks)[size_t(block) + 1] - r0;
      const int seq = batch->rows[size_t(r0)].seq;
      // KV head g; rows keep their stride
      const kernels::PagedKv view = kernels::kv_head(kv->view(layer, batch->seqs[size_t(seq)].page_table), int64_t(g) * head_dim);
      for (int i = 0; i < n_rows; ++i) {
        const RowKeys keys = row_keys(*batch, r0 + i, window, seq_end);
        key_begin[i] = keys.begin;
        key_end[i] = keys.end;
      }
      const int64_t at = int64_t(r0) * q_dim + int64_t(g) * n_gqa * head_dim;
      const kernels::AttentionRows rows{&(*q)[size_t(at)], q_dim, &(*out)[size_t(at)], q_dim, key_begin, key_end, n_rows};
      kernels::attention_rows(rows, view, n_gqa, head_dim, scale, s);
    }
  }
};

}  // namespace

struct Forward::Buffers {
  // Activations, one row per batch row (row stride in floats given by the width).
  std::vector<float> x;     // residual stream      [max_rows × n_embd]
  std::vector<float> xb;    // normed / branch out  [max_rows × n_embd]
  std::vector<float> q;     // queries              [max_rows × q_dim]
  std::vector<float> k, v;  // this step's keys/values [max_rows × kv_dim]
  std::vector<float> att;   // attention output     [max_rows × q_dim]
  std::vector<float> hb, hb2;  // FFN hidden         [max_rows × ffn_width]
  std::vector<float> final_rows;  // final-normed rows that want outputs [max_rows × n_embd]
  std::vector<float> rope_cos, rope_sin;          // per row, n_rot/2 each (global layers)
  std::vector<float> rope_cos_swa, rope_sin_swa;  // the same with the local layers' base (gemma3)
  std::vector<std::vector<float>> att_scratch;  // per thread: an attention block's scores (grown to fit)
  std::vector<int> out_rows;  // indices of output rows: want_logits ones, then want_hidden-only ones
  std::vector<int> seq_end;   // non-causal models: last position + 1 of each sequence in the batch
  std::vector<int> att_blocks;  // attention blocks of rows: each one's first row, then the row count
  // qwen3moe: router probabilities, each row's experts and weights, rows gathered per expert, and
  // each (row, chosen expert)'s output
  std::vector<float> router;       // [max_rows × n_expert]
  std::vector<int> route_expert;   // [max_rows × n_expert_used]
  std::vector<float> route_weight; // [max_rows × n_expert_used]
  std::vector<int> expert_slots;   // (row · n_expert_used + j) of the rows routed to one expert
  std::vector<float> moe_in, moe_y;  // [max_rows × n_embd]
  std::vector<float> moe_out;        // [max_rows × n_expert_used × n_embd]
  std::vector<RouterMargin> router_margins;  // [n_layer × max_rows]
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
  b.hb.resize(R * hp.ffn_width());
  b.hb2.resize(R * hp.ffn_width());
  b.final_rows.resize(R * hp.n_embd);
  b.rope_cos.resize(R * (hp.n_rot / 2));
  b.rope_sin.resize(R * (hp.n_rot / 2));
  if (hp.n_swa > 0) {
    b.rope_cos_swa.resize(R * (hp.n_rot / 2));
    b.rope_sin_swa.resize(R * (hp.n_rot / 2));
  }
  b.att_scratch.resize(size_t(pool.size()));
  b.out_rows.reserve(R);
  b.seq_end.reserve(R);
  b.att_blocks.reserve(R + 1);
  if (hp.is_moe()) {
    const size_t K = size_t(hp.n_expert_used);
    b.router.resize(R * hp.n_expert);
    b.route_expert.resize(R * K);
    b.route_weight.resize(R * K);
    b.expert_slots.reserve(R * K);
    b.moe_in.resize(R * hp.n_embd);
    b.moe_y.resize(R * hp.n_embd);
    b.moe_out.resize(R * K * hp.n_embd);
    b.router_margins.resize(size_t(hp.n_layer) * R);
  }
}

Forward::~Forward() = default;

const RouterMargin& Forward::router_margin(int layer, int row) const {
  return buf_->router_margins.at(size_t(layer) * size_t(max_rows_) + size_t(row));
}

uint64_t Forward::scratch_bytes(const HParams& hp, int max_rows, int n_threads) {
  const uint64_t rows = uint64_t(std::max(max_rows, 0));
  // One row each of: x, xb, final_rows (n_embd); q, att (q_dim); k, v (kv_dim); hb, hb2 (ffn width);
  // rope (twice with a sliding window); with experts, the router and the routed rows.
  uint64_t per_row = 3 * uint64_t(hp.n_embd) + 2 * uint64_t(hp.q_dim()) + 2 * uint64_t(hp.kv_dim()) +
                     2 * uint64_t(hp.ffn_width()) + uint64_t(hp.n_rot) * (hp.n_swa > 0 ? 2 : 1);
  if (hp.is_moe()) {
    per_row += uint64_t(hp.n_expert) + 2 * uint64_t(hp.n_expert_used) + 2 * uint64_t(hp.n_embd) +
               uint64_t(hp.n_expert_used) * uint64_t(hp.n_embd);
  }
  const uint64_t gqa = hp.n_kv_head > 0 ? uint64_t(hp.n_head / hp.n_kv_head) : 1;
  const uint64_t scores = uint64_t(std::max(n_threads, 1)) * gqa * uint64_t(std::max(hp.n_ctx_train, 0));
  // Quantised activations: under two bytes per input element of the widest matmul input.
  const uint64_t activations = rows * 2 * uint64_t(std::max(hp.n_embd, hp.n_ff));
  return (rows * per_row + scores) * sizeof(float) + activations;
}

// One run of the forward pass over a checked batch: the steps of a layer as methods that read top to
// bottom (embed_tokens, then per layer attention and feed_forward, then outputs), and the small
// helpers they share below them.
struct Forward::Pass {
  Pass(Forward& f, const Batch& batch, KvPool& kv, PassProfile* profile);

  void embed_tokens();
  void attention(int l);
  void feed_forward(int l);
  void outputs(int n_logit_rows, float* logits, float* hidden);
  const LayerWeights* weights = nullptr;  // the layer that attention and feed_forward run

 private:
  const HParams& hp;
  const Model& m;
  Buffers& b;
  kernels::ThreadPool& pool;
  const Batch& batch;
  KvPool& kv;
  PassProfile* profile;
  const int max_rows, n, E, Q, KV, HD, half_rot;
  const ModelRecipe& recipe;
  const kernels::RopeParams rope, rope_swa;
  kernels::ThreadPool* att_pool = nullptr;  // the pool for this batch's attention (set by embed_tokens)
  std::chrono::steady_clock::time_point lap_start;

  // Row-wise steps that feed one matmul run inside it, on the rows each thread quantises. They reach
  // their state through this pass, so that the std::functions are made once and allocate nothing.
  const float* norm = nullptr;     // this layer's RMSNorm weight
  const float* up_bias = nullptr;  // GeluUp: this layer's FFN up bias, added before the GELU
  kernels::PrepareRows norm_rows, swiglu_rows, geglu_rows, bias_gelu_rows;
  const kernels::PrepareRows no_prepare{};
  std::function<void(int, int)> finish_row;

  void finish_qkv_row(int layer, int r);
  double kv_bytes_read(int layer) const;
  // The routed experts of rows `in` (RMSNormed by prepare_in inside the router's matmul, as the layer's
  // description says), into xb.
  void moe_ffn(int layer, const LayerWeights& L, const float* in, const kernels::PrepareRows& prepare_in);

  // lap(&PassProfile::x) adds the time since the previous lap to phase x; nothing without a profile.
  void lap(double PassProfile::*phase) {
    if (!profile) return;
    const auto now = std::chrono::steady_clock::now();
    profile->*phase += std::chrono::duration<double>(now - lap_start).count();
    lap_start = now;
  }
  kernels::ThreadPool& mm_pool(const kernels::WeightMatrix& w, int rows) {
    return kernels::pool_for(kernels::PoolWork::Matmul, int64_t(rows) * w.n_in * w.n_out, pool, b.solo);
  }
  void matmul(const kernels::WeightMatrix& w, const float* in, float* out, int rows,
              const kernels::PrepareRows& prepare = {}) {
    kernels::matmul(w, in, rows, w.n_in, out, w.n_out, mm_pool(w, rows), b.mm, prepare);
  }
  // Matrices reading the same input (q, k, v; gate, up): one pool run for all of them.
  void matmul_shared(std::initializer_list<kernels::MatmulOutput> outputs, const float* in, int rows,
                     const kernels::PrepareRows& prepare) {
    int64_t work = 0;
    for (const kernels::MatmulOutput& o : outputs) work += int64_t(rows) * o.w->n_in * o.w->n_out;
    kernels::ThreadPool& p = kernels::pool_for(kernels::PoolWork::Matmul, work, pool, b.solo);
    kernels::matmul_shared(std::span<const kernels::MatmulOutput>(outputs.begin(), outputs.size()), in, rows,
                           outputs.begin()->w->n_in, p, b.mm, prepare);
  }
  void add_bias(float* y, const float* bias, int width) {
    if (!bias) return;
    for (int r = 0; r < n; ++r) {
      float* yr = y + int64_t(r) * width;
      for (int i = 0; i < width; ++i) yr[i] += bias[i];
    }
  }
  void residual(float* x, const float* add, int width) {
    for (int64_t i = 0; i < int64_t(n) * width; ++i) x[i] += add[i];
  }
  void rmsnorm_rows(float* y, const float* w) {
    for (int r = 0; r < n; ++r) kernels::rmsnorm(y + int64_t(r) * E, w, y + int64_t(r) * E, E, hp.rms_eps);
  }
  void layernorm_rows(float* y, const float* w, const float* bias) {
    for (int r = 0; r < n; ++r) kernels::layernorm(y + int64_t(r) * E, w, bias, y + int64_t(r) * E, E, hp.rms_eps);
  }
};

void Forward::run(const Batch& batch, KvPool& kv, float* logits, float* hidden, PassProfile* profile) {
  const HParams& hp = model_.hparams();
  // bad input is an exception, never a wild write
  if (kv.kv_dim() != hp.kv_dim() || kv.page_stride() != KvPool::page_stride_for(hp, kv.page_tokens(), kv.type())) {
    throw std::invalid_argument("forward: KV pool was built for another model shape");
  }
  const int n_logit_rows =
      check_run(hp, batch, kv.page_tokens(), kv.n_pages(), max_rows_, buf_->out_rows, logits, hidden);
  if (batch.rows.empty()) return;

  Pass pass(*this, batch, kv, profile);
  pass.embed_tokens();
  for (int l = 0; l < hp.n_layer; ++l) {
    pass.weights = layer_source_ ? &layer_source_->acquire(l) : &model_.layers()[size_t(l)];
    pass.attention(l);
    pass.feed_forward(l);
    if (layer_source_) layer_source_->release(l);
  }
  pass.outputs(n_logit_rows, logits, hidden);
}

Forward::Pass::Pass(Forward& f, const Batch& batch_, KvPool& kv_, PassProfile* profile_)
    : hp(f.model_.hparams()),
      m(f.model_),
      b(*f.buf_),
      pool(f.pool_),
      batch(batch_),
      kv(kv_),
      profile(profile_),
      max_rows(f.max_rows_),
      n(int(batch_.rows.size())),
      E(hp.n_embd),
      Q(hp.q_dim()),
      KV(hp.kv_dim()),
      HD(hp.head_dim),
      half_rot(hp.n_rot / 2),
      recipe(f.model_.recipe()),
      rope(rope_params(hp, recipe, m.rope_factors(), false)),
      rope_swa(rope_params(hp, recipe, nullptr, true)),
      lap_start(profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}) {
  const int F = hp.ffn_width();
  norm_rows = [this](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) kernels::rmsnorm(&b.x[size_t(r) * E], norm, &b.xb[size_t(r) * E], E, hp.rms_eps);
  };
  swiglu_rows = [this, F](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* gate = &b.hb[size_t(r) * F];
      kernels::swiglu(gate, &b.hb2[size_t(r) * F], gate, F);
    }
  };
  geglu_rows = [this, F](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* gate = &b.hb[size_t(r) * F];
      kernels::geglu(gate, &b.hb2[size_t(r) * F], gate, F);
    }
  };
  bias_gelu_rows = [this, F](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* up = &b.hb[size_t(r) * F];
      if (up_bias) {
        for (int i = 0; i < F; ++i) up[i] += up_bias[i];
      }
      kernels::gelu(up, up, F);
    }
  };
  finish_row = [this](int layer, int r) { finish_qkv_row(layer, r); };
}

// Token embedding (embedding.h), and each row's RoPE
// angles (shared by all layers and heads); the pool for this batch's attention.
void Forward::Pass::embed_tokens() {
  for (int r = 0; r < n; ++r) {
    const BatchRow& row = batch.rows[size_t(r)];
    embed_row(m, row.token, row.pos, &b.x[size_t(r) * E], &b.xb[size_t(r) * E]);
    if (!recipe.rope()) continue;
    kernels::rope_angles(row.pos, rope, &b.rope_cos[size_t(r) * half_rot], &b.rope_sin[size_t(r) * half_rot]);
    if (hp.n_swa > 0) {
      kernels::rope_angles(row.pos, rope_swa, &b.rope_cos_swa[size_t(r) * half_rot],
                           &b.rope_sin_swa[size_t(r) * half_rot]);
    }
  }
  if (!hp.causal) {
    b.seq_end.assign(batch.seqs.size(), 0);
    for (const BatchRow& row : batch.rows) b.seq_end[size_t(row.seq)] = std::max(b.seq_end[size_t(row.seq)], row.pos + 1);
  }
  b.att_blocks.clear();
  const int block_rows = attention_block_rows(hp.n_head / hp.n_kv_head);
  for (int r = 0; r < n; ++r) {
    const BatchRow& row = batch.rows[size_t(r)];
    const bool extends = r > 0 && r - b.att_blocks.back() < block_rows && row.seq == batch.rows[size_t(r) - 1].seq &&
                         row.pos == batch.rows[size_t(r) - 1].pos + 1;
    if (!extends) b.att_blocks.push_back(r);
  }
  b.att_blocks.push_back(n);
  int64_t att_work = 0;  // multiply-adds of this batch's attention, to decide whether to use the pool
  int last_key = 0;      // a block's rows span at most the batch's last key
  for (int r = 0; r < n; ++r) {
    const int end = row_keys(batch, r, 0, hp.causal ? nullptr : &b.seq_end).end;  // windows only shorten
    att_work += int64_t(end) * Q * 2;
    last_key = std::max(last_key, end);
  }
  const auto scratch = size_t(kernels::attention_rows_scratch(block_rows, hp.n_head / hp.n_kv_head, last_key));
  for (auto& s : b.att_scratch) {
    if (s.size() < scratch) s.resize(scratch);
  }
  att_pool = &kernels::pool_for(kernels::PoolWork::Attention, att_work, pool, b.solo);
  lap(&PassProfile::other_s);
}

// One layer's attention block, into the residual stream x.
void Forward::Pass::attention(int l) {
  const LayerWeights& L = *weights;
  const bool pre_norm = recipe.layers[size_t(l)].norm == NormPlacement::PreRms;

  // the attention's RMSNorm (PostLayerNorm: none, the block reads the residual), then the qkv
  // matmuls (+ biases)
  norm = L.attn_norm;
  matmul_shared({{&L.wq, b.q.data(), L.wq.n_out}, {&L.wk, b.k.data(), L.wk.n_out}, {&L.wv, b.v.data(), L.wv.n_out}},
                pre_norm ? b.xb.data() : b.x.data(), n, pre_norm ? norm_rows : no_prepare);
  add_bias(b.q.data(), L.bq, Q);
  add_bias(b.k.data(), L.bk, KV);
  add_bias(b.v.data(), L.bv, KV);
  lap(&PassProfile::qkv_s);

  // multihead attention over (row, KV head) tasks, after each row's q/k norms, RoPE and K/V store
  // (finish_qkv_row); each task is computed whole by one thread, so its result does not depend on the
  // split (invariant 7)
  const AttentionJob job{&batch,
                         &kv,
                         l,
                         &b.q,
                         &b.att,
                         &b.att_scratch,
                         Q,
                         HD,
                         hp.n_kv_head,
                         hp.n_head / hp.n_kv_head,
                         hp.attn_scale,
                         recipe.layers[size_t(l)].window,
                         hp.causal ? nullptr : &b.seq_end,
                         &b.att_blocks,
                         att_pool->size(),
                         &finish_row};
  att_pool->run([&job](int t) { job.run(t); });
  lap(&PassProfile::attention_s);
  if (profile) profile->attention_bytes += kv_bytes_read(l);

  // output projection (+ bias), its own RMSNorm (post_block_norms) and the residual (PostLayerNorm:
  // then LayerNorm)
  matmul(L.wo, b.att.data(), b.xb.data(), n);
  add_bias(b.xb.data(), L.bo, E);
  if (recipe.layers[size_t(l)].post_block_norms) rmsnorm_rows(b.xb.data(), L.post_attn_norm);
  residual(b.x.data(), b.xb.data(), E);
  if (!pre_norm) layernorm_rows(b.x.data(), L.attn_out_norm, L.attn_out_norm_b);
  lap(&PassProfile::output_s);
}

// Bytes of keys and values layer `layer`'s attention read: a block of rows (consecutive positions of
// one sequence) reads the keys its rows span once, a key row and a value row each.
double Forward::Pass::kv_bytes_read(int layer) const {
  const int window = recipe.layers[size_t(layer)].window;
  const std::vector<int>* seq_end = hp.causal ? nullptr : &b.seq_end;
  int64_t keys = 0;
  for (size_t k = 0; k + 1 < b.att_blocks.size(); ++k) {
    const int first = b.att_blocks[k], last = b.att_blocks[k + 1] - 1;
    keys += row_keys(batch, last, window, seq_end).end - row_keys(batch, first, window, seq_end).begin;
  }
  return double(keys) * 2 * double(kv.row_stride()) * sizeof(uint16_t);
}

// Per row after the q, k, v matmuls: the q/k RMSNorms and RoPE as the layer's description says (a
// local layer's RoPE with its own base), then k and v into the row's pages. Runs inside the attention job.
void Forward::Pass::finish_qkv_row(int layer, int r) {
  const LayerWeights& L = *weights;
  const LayerRecipe& R = recipe.layers[size_t(layer)];
  float* qr = &b.q[size_t(r) * Q];
  float* kr = &b.k[size_t(r) * KV];
  if (R.qk_norm) {
    for (int h = 0; h < hp.n_head; ++h) kernels::rmsnorm(qr + h * HD, L.q_norm, qr + h * HD, HD, hp.rms_eps);
    for (int h = 0; h < hp.n_kv_head; ++h) kernels::rmsnorm(kr + h * HD, L.k_norm, kr + h * HD, HD, hp.rms_eps);
  }
  if (R.rope != RopeKind::None) {
    const bool local = R.local();
    const float* c = &(local ? b.rope_cos_swa : b.rope_cos)[size_t(r) * half_rot];
    const float* sn = &(local ? b.rope_sin_swa : b.rope_sin)[size_t(r) * half_rot];
    const kernels::RopeParams& rp = local ? rope_swa : rope;
    for (int h = 0; h < hp.n_head; ++h) kernels::rope_apply(qr + h * HD, c, sn, rp);
    for (int h = 0; h < hp.n_kv_head; ++h) kernels::rope_apply(kr + h * HD, c, sn, rp);
  }
  const BatchRow& row = batch.rows[size_t(r)];
  kernels::kv_store(kr, &b.v[size_t(r) * KV], kv.type(), kv.k_base(layer), kv.v_base(layer), kv.page_stride(),
                    kv.row_stride(), kv.page_tokens(), batch.seqs[size_t(row.seq)].page_table, KV, HD, row.pos);
}

// One layer's feed-forward block (layer_recipe.h's FeedForwardKind), into the residual stream x:
// its input RMSNormed (PreRms) inside the first matmul, the block, its own RMSNorm (post_block_norms),
// the residual (PostLayerNorm: then LayerNorm).
void Forward::Pass::feed_forward(int l) {
  const LayerWeights& L = *weights;
  const LayerRecipe& R = recipe.layers[size_t(l)];
  const bool pre_norm = R.norm == NormPlacement::PreRms;
  const float* in = pre_norm ? b.xb.data() : b.x.data();
  const kernels::PrepareRows& prepare_in = pre_norm ? norm_rows : no_prepare;
  norm = L.ffn_norm;
  up_bias = L.b_up;
  switch (R.ffn) {
    case FeedForwardKind::Experts:
      moe_ffn(l, L, in, prepare_in);
      lap(&PassProfile::ffn_up_s);
      break;
    case FeedForwardKind::GeluUp:
      matmul(L.w_up, in, b.hb.data(), n, prepare_in);
      lap(&PassProfile::ffn_up_s);
      matmul(L.w_down, b.hb.data(), b.xb.data(), n, bias_gelu_rows);
      add_bias(b.xb.data(), L.b_down, E);
      break;
    case FeedForwardKind::SwiGlu:
    case FeedForwardKind::GeGlu:
      matmul_shared({{&L.w_gate, b.hb.data(), L.w_gate.n_out}, {&L.w_up, b.hb2.data(), L.w_up.n_out}}, in, n,
                    prepare_in);
      lap(&PassProfile::ffn_up_s);
      matmul(L.w_down, b.hb.data(), b.xb.data(), n, R.ffn == FeedForwardKind::GeGlu ? geglu_rows : swiglu_rows);
      break;
  }
  if (R.post_block_norms) rmsnorm_rows(b.xb.data(), L.post_ffn_norm);
  residual(b.x.data(), b.xb.data(), E);
  if (!pre_norm) layernorm_rows(b.x.data(), L.layer_out_norm, L.layer_out_norm_b);
  lap(&PassProfile::ffn_down_s);
}

// qwen3moe's FFN on the rows x (normed into xb by the router's matmul), into xb: each row's router
// softmax over all experts, its n_expert_used most probable experts with their probabilities
// renormalised, then expert by expert the rows routed to it (so a batch reads each chosen expert once),
// each row's outputs summed in the order of its choices (spec architectures-more.md §3.3). A row's
// result does not depend on the other rows (invariant 7): its expert matmuls are bitwise what they
// would be alone.
void Forward::Pass::moe_ffn(int layer, const LayerWeights& L, const float* in, const kernels::PrepareRows& prepare_in) {
  const int NE = hp.n_expert, K = hp.n_expert_used, FE = hp.n_ff_exp;
  matmul(L.router, in, b.router.data(), n, prepare_in);
  for (int r = 0; r < n; ++r) {
    b.router_margins[size_t(layer) * size_t(max_rows) + size_t(r)] =
        route_row(&b.router[size_t(r) * NE], NE, K, &b.route_expert[size_t(r) * K], &b.route_weight[size_t(r) * K]);
  }
  for (int e = 0; e < NE; ++e) {
    b.expert_slots.clear();
    for (int slot = 0; slot < n * K; ++slot) {
      if (b.route_expert[size_t(slot)] == e) b.expert_slots.push_back(slot);
    }
    const int rows = int(b.expert_slots.size());
    if (rows == 0) continue;
    for (int i = 0; i < rows; ++i) {
      std::memcpy(&b.moe_in[size_t(i) * E], &in[size_t(b.expert_slots[size_t(i)] / K) * E], sizeof(float) * E);
    }
    const kernels::WeightMatrix gate = expert(L.gate_exps, e, NE), up = expert(L.up_exps, e, NE);
    const kernels::WeightMatrix down = expert(L.down_exps, e, NE);
    matmul_shared({{&gate, b.hb.data(), FE}, {&up, b.hb2.data(), FE}}, b.moe_in.data(), rows, {});
    matmul(down, b.hb.data(), b.moe_y.data(), rows, swiglu_rows);
    for (int i = 0; i < rows; ++i) {
      std::memcpy(&b.moe_out[size_t(b.expert_slots[size_t(i)]) * E], &b.moe_y[size_t(i) * E], sizeof(float) * E);
    }
  }
  for (int r = 0; r < n; ++r) {
    float* out = &b.xb[size_t(r) * E];
    for (int j = 0; j < K; ++j) {
      const float w = b.route_weight[size_t(r) * K + j];
      const float* y = &b.moe_out[(size_t(r) * K + j) * E];
      for (int i = 0; i < E; ++i) out[i] = j == 0 ? y[i] * w : out[i] + y[i] * w;
    }
  }
}

// Final RMSNorm (PostLayerNorm: none, the last layer's output is the hidden state), only for the rows that
// want outputs (gathered so that the classifier reads its weights once for all of them); then the
// classifier over the leading want_logits rows (+ bias: qwen2; gemma3: soft-capped).
void Forward::Pass::outputs(int n_logit_rows, float* logits, float* hidden) {
  const int n_out = int(b.out_rows.size());
  if (n_out == 0) return;
  for (int i = 0; i < n_out; ++i) {
    const float* xr = &b.x[size_t(b.out_rows[size_t(i)]) * E];
    if (recipe.final_rmsnorm()) {
      kernels::rmsnorm(xr, m.output_norm(), &b.final_rows[size_t(i) * E], E, hp.rms_eps);
    } else {
      std::memcpy(&b.final_rows[size_t(i) * E], xr, sizeof(float) * E);
    }
  }
  if (hidden) std::memcpy(hidden, b.final_rows.data(), sizeof(float) * size_t(n_out) * E);

  if (logits && n_logit_rows > 0) {
    const kernels::WeightMatrix& out = m.output();
    kernels::matmul(out, b.final_rows.data(), n_logit_rows, E, logits, hp.n_vocab, mm_pool(out, n_logit_rows), b.mm);
    for (int i = 0; i < n_logit_rows; ++i) {
      float* lr = logits + int64_t(i) * hp.n_vocab;
      if (const float* bias = m.output_bias()) {
        for (int j = 0; j < hp.n_vocab; ++j) lr[j] += bias[j];
      }
      if (const float c = hp.logit_softcap; c > 0.f) {
        for (int j = 0; j < hp.n_vocab; ++j) lr[j] = c * std::tanh(lr[j] / c);
      }
    }
  }
  lap(&PassProfile::classifier_s);
}

}  // namespace infer::model
