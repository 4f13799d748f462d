// The GPU backend: every matrix in the GPU's format (its own layout where the GPU has kernels for it,
// else dequantised to F16; gpu_kernels.h), uploaded once, except the layers that do not fit, which are
// streamed from page-locked host memory each pass (model/layer_streamer.h); the paged KV cache and all activations in GPU memory, the whole forward pass on one stream.
// The host embeds the tokens and computes the RoPE angles (the CPU's own functions, so the angles are
// bit-identical), and routes mixture-of-experts rows (model/moe_routing.h); logits and hidden states
// come back. Memory is planned before anything is allocated: a model that does not fit fails at load.
#include <algorithm>
#include <chrono>
#include <map>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda/block_layout.h"
#include "cuda/check.h"
#include "cuda/cuda_stream_device.h"
#include "cuda/cuda_backend.h"
#include "cuda/gpu_backend.h"
#include "cuda/gpu_kernels.h"
#include "kernels/quant/interleave.h"
#include "kernels/ops/ops.h"
#include "kernels/quant/quant.h"
#include "model/batch_check.h"
#include "model/embedding.h"
#include "model/layer_streamer.h"
#include "model/moe_routing.h"
#include "model/stream_plan.h"

namespace infer::cuda {
namespace {

using gguf::TensorType;

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1u << 19)) >> 20) + " MiB"; }

// Device memory of the backend, freed at destruction.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() {
    for (void* p : blocks_) cudaFree(p);
  }
  template <typename T>
  T* alloc(size_t n) {
    void* p = nullptr;
    const size_t bytes = std::max<size_t>(n, 1) * sizeof(T);
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    blocks_.push_back(p);
    bytes_ += bytes;
    return static_cast<T*>(p);
  }
  uint64_t bytes() const { return bytes_; }

 private:
  std::vector<void*> blocks_;
  uint64_t bytes_ = 0;
};

// Page-locked host memory for the per-pass copies (asynchronous only from pinned memory).
template <typename T>
class Pinned {
 public:
  Pinned() = default;
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  ~Pinned() {
    if (p_) cudaFreeHost(p_);
  }
  T* reserve(size_t n) {
    if (n > n_) {
      if (p_) cudaFreeHost(p_);
      p_ = nullptr;
      check(cudaMallocHost(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T)), "cudaMallocHost");
      n_ = n;
    }
    return p_;
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// The layout a matrix keeps on the GPU (gpu_kernels.h): its own where the GPU has kernels for it.
WeightKind kind_on_gpu(const kernels::WeightMatrix& w) {
  switch (w.type) {
    case TensorType::F32: return WeightKind::F32;
    case TensorType::BF16: return WeightKind::BF16;
    case TensorType::Q8_0: return WeightKind::Q8_0;
    case TensorType::Q4_K: return WeightKind::Q4_K;
    case TensorType::Q5_K: return WeightKind::Q5_K;
    case TensorType::Q6_K: return WeightKind::Q6_K;
    default: return WeightKind::F16;  // F16 itself, and the types dequantised at load
  }
}

bool dequantised_on_gpu(const kernels::WeightMatrix& w) {
  return kind_on_gpu(w) == WeightKind::F16 && w.type != TensorType::F16;
}

int64_t gpu_row_bytes(const kernels::WeightMatrix& w) {
  if (dequantised_on_gpu(w)) return w.n_in * 2;
  return has_block_layout(w.type) ? gpu_block_row_bytes(w.type, w.n_in) : int64_t(w.row_bytes);
}

uint64_t bytes_on_gpu(const kernels::WeightMatrix& w) {
  return w.data ? uint64_t(gpu_row_bytes(w)) * uint64_t(w.n_out) : 0;
}

// Every matrix a layer may have.
template <typename L, typename F>
void for_each_matrix(L& layer, F&& f) {
  for (auto* m : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down, &layer.router,
                  &layer.gate_exps, &layer.up_exps, &layer.down_exps}) {
    f(*m);
  }
}

// Whether a matrix's bytes are already what the GPU reads (no dequantisation, no interleaving).
bool gpu_reads_as_stored(const kernels::WeightMatrix& w) {
  return !w.interleaved && !dequantised_on_gpu(w) && w.type != TensorType::Q8_0 && w.type != TensorType::Q6_K;
}

// The matrix as the GPU keeps it (type, row bytes), its data still `w`'s.
kernels::WeightMatrix gpu_format(const kernels::WeightMatrix& w) {
  kernels::WeightMatrix g = w;
  if (dequantised_on_gpu(w)) g.type = TensorType::F16;
  g.row_bytes = uint64_t(gpu_row_bytes(w));
  g.interleaved = false;
  return g;
}

// Writes `w` in the GPU's layout (bytes_on_gpu(w) bytes) at `dst` on the host: rows dequantised to F16,
// or block rows (interleaved ones put back in row order first) rewritten by to_gpu_row; the rows split
// over threads.
void write_gpu_format(const kernels::WeightMatrix& w, uint8_t* dst) {
  if (gpu_reads_as_stored(w)) {
    std::memcpy(dst, w.data, bytes_on_gpu(w));
    return;
  }
  const bool dequantise = dequantised_on_gpu(w);
  const int64_t row_bytes = gpu_row_bytes(w);
  const int n_threads = int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1u, 16u));
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> row(size_t(w.n_in));
      std::vector<uint8_t> file_row(w.row_bytes);
      for (int64_t r = t; r < w.n_out; r += n_threads) {
        uint8_t* out = dst + r * row_bytes;
        if (dequantise) {
          kernels::dequantize_weight_row(w, r, row.data());
          auto* h = reinterpret_cast<uint16_t*>(out);
          for (int64_t i = 0; i < w.n_in; ++i) h[i] = kernels::f32_to_f16(row[size_t(i)]);
          continue;
        }
        const auto* src = static_cast<const uint8_t*>(w.data);
        const uint8_t* in = src + r * int64_t(w.row_bytes);
        if (w.interleaved) {
          kernels::deinterleave_row(w.type, src, w.n_in, w.n_out, r, file_row.data());
          in = file_row.data();
        }
        to_gpu_row(w.type, in, w.n_in, out);
      }
    });
  }
  for (std::thread& th : threads) th.join();
}

// A matrix in GPU memory, in the GPU's format (gpu_format), as the kernels take it.
GpuMatrix as_gpu(const kernels::WeightMatrix& w) {
  GpuMatrix g;
  if (!w.data) return g;
  g.kind = kind_on_gpu(w);
  g.data = w.data;
  g.n_in = w.n_in;
  g.n_out = w.n_out;
  g.row_bytes = int64_t(w.row_bytes);
  return g;
}

struct GpuLayer {
  GpuMatrix wq, wk, wv, wo, w_gate, w_up, w_down, router, gate_exps, up_exps, down_exps;
  const float *attn_norm = nullptr, *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;
  const float *q_norm = nullptr, *k_norm = nullptr, *post_attn_norm = nullptr;
  const float *attn_out_norm = nullptr, *attn_out_norm_b = nullptr, *ffn_norm = nullptr;
  const float *b_up = nullptr, *b_down = nullptr, *post_ffn_norm = nullptr;
  const float *layer_out_norm = nullptr, *layer_out_norm_b = nullptr;
};

// A layer whose weights are in GPU memory (the streamer's views), as the kernels take it.
GpuLayer as_gpu(const model::LayerWeights& L) {
  GpuLayer G;
  G.wq = as_gpu(L.wq);
  G.wk = as_gpu(L.wk);
  G.wv = as_gpu(L.wv);
  G.wo = as_gpu(L.wo);
  G.w_gate = as_gpu(L.w_gate);
  G.w_up = as_gpu(L.w_up);
  G.w_down = as_gpu(L.w_down);
  G.router = as_gpu(L.router);
  G.gate_exps = as_gpu(L.gate_exps);
  G.up_exps = as_gpu(L.up_exps);
  G.down_exps = as_gpu(L.down_exps);
  G.attn_norm = L.attn_norm;
  G.bq = L.bq;
  G.bk = L.bk;
  G.bv = L.bv;
  G.bo = L.bo;
  G.q_norm = L.q_norm;
  G.k_norm = L.k_norm;
  G.post_attn_norm = L.post_attn_norm;
  G.attn_out_norm = L.attn_out_norm;
  G.attn_out_norm_b = L.attn_out_norm_b;
  G.ffn_norm = L.ffn_norm;
  G.b_up = L.b_up;
  G.b_down = L.b_down;
  G.post_ffn_norm = L.post_ffn_norm;
  G.layer_out_norm = L.layer_out_norm;
  G.layer_out_norm_b = L.layer_out_norm_b;
  return G;
}

class GpuBackend final : public model::Backend {
 public:
  GpuBackend(const model::Model& m, const model::DeviceOptions& opts, int max_rows, int page_tokens, int n_pages);
  ~GpuBackend() override {
    streamer_.reset();  // it waits for its copies and frees its memory through the device
    stream_device_.reset();
    drop_graphs();
    if (stream_) cudaStreamDestroy(stream_);
    if (page_tables_) cudaFree(page_tables_);
  }

  void run(const model::Batch& batch, float* logits, float* hidden, model::PassProfile* profile) override;
  void copy_page(int32_t from, int32_t to, int n_tokens) override;
  int page_tokens() const override { return page_tokens_; }
  int n_pages() const override { return n_pages_; }
  uint64_t kv_bytes() const override { return kv_bytes_; }
  int max_rows() const override { return max_rows_; }
  model::DeviceKind kind() const override { return model::DeviceKind::Cuda; }
  const model::RouterMargin& router_margin(int layer, int row) const override {
    if (!hp_.is_moe()) throw std::out_of_range("router_margin: the model has no experts");
    return router_margins_.at(size_t(layer) * size_t(max_rows_) + size_t(row));
  }
  std::string description() const override { return description_; }
  uint64_t streamed_bytes_per_pass() const override { return plan_.streamed_bytes_per_pass; }

 private:
  const model::Model& m_;
  const model::HParams& hp_;
  const int max_rows_, page_tokens_, n_pages_;
  const int E_, Q_, KV_, HD_, F_, half_;
  const model::ModelRecipe& recipe_;  // what each layer runs (model/layer_recipe.h)
  bool post_layernorm() const { return recipe_.norm() == model::NormPlacement::PostLayerNorm; }
  uint64_t kv_bytes_ = 0;
  int64_t page_stride_ = 0;
  std::string description_;
  cudaStream_t stream_ = nullptr;
  DeviceArena arena_;

  // weights: the layers through the streamer (resident ones copied once, the others streamed into
  // slots each pass), from host_layers_ (the GPU's format; streamed layers' bytes page-locked)
  model::StreamPlan plan_;
  std::vector<model::LayerWeights> host_layers_;
  Pinned<uint8_t> streamed_host_;
  std::unique_ptr<CudaStreamDevice> stream_device_;
  std::unique_ptr<model::LayerStreamer> streamer_;
  std::vector<GpuLayer> resident_;  // as_gpu of the resident layers' views
  GpuMatrix output_;
  const float *output_norm_ = nullptr, *output_bias_ = nullptr;
  const uint16_t* gelu_table_ = nullptr;
  __half* kv_ = nullptr;

  // activations [max_rows × width] and per-row inputs
  float *x_, *xb_, *q_, *k_, *v_, *att_, *hb_, *hb2_, *final_, *logits_;
  float *cos_, *sin_, *cos_swa_, *sin_swa_;
  int* rows_i_;  // pos, end, pt_offset, out_rows: 4 × max_rows
  int* page_tables_ = nullptr;
  size_t page_table_cap_ = 0;
  float *router_ = nullptr, *moe_in_ = nullptr, *moe_y_ = nullptr, *moe_out_ = nullptr, *route_w_ = nullptr;
  int* moe_index_ = nullptr;
  ActScratch act_;  // block-format matmuls' quantised activations

  // host staging
  Pinned<float> h_x_, h_angles_, h_router_, h_route_w_;
  Pinned<int> h_rows_i_, h_pt_, h_moe_index_;
  std::vector<float> embed_scratch_;
  std::vector<int> out_rows_, seq_end_, seq_pt_offset_;
  std::vector<int> route_expert_;
  std::vector<model::RouterMargin> router_margins_;  // [n_layer × max_rows]
  int layer_ = 0;  // the layer the pass is in

  GpuMatrix upload(const kernels::WeightMatrix& w);
  const float* upload(const float* v, int64_t n);
  void upload_weights(const model::DeviceOptions& opts, uint64_t layer_budget);
  void allocate_scratch();
  // The widest input of any matmul (the activation rows quantised for block formats).
  int64_t widest_input() const {
    return std::max({int64_t(E_), int64_t(Q_), int64_t(F_), int64_t(hp_.is_moe() ? hp_.n_ff_exp : 0)});
  }
  void grow_page_tables(size_t n);

  // Captured passes (CUDA graphs) of small batches, by shape: one launch instead of hundreds, which
  // dominate a small model's decode step. Experts are routed on the host mid-pass: never captured.
  struct GraphKey {
    int rows, out_rows, logit_rows;
    auto operator<=>(const GraphKey&) const = default;
  };
  static constexpr int kGraphRows = 64;     // batches up to this many rows are captured
  static constexpr size_t kMaxGraphs = 64;  // shapes kept; all dropped when more come
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  void drop_graphs() {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
  }
  void compute(int n_logit_rows);  // the pass's kernels, between the uploads and the downloads
  void launch_captured(int n_logit_rows);

  // one pass, for the n rows of the current batch
  int n_ = 0;
  RowsView rows_view_{};
  void prepare_inputs(const model::Batch& batch);
  void attention_block(int l, const GpuLayer& L);
  void feed_forward_block(int l, const GpuLayer& L);
  void moe_block(const GpuLayer& L, const float* in);
  void output_kernels(int n_logit_rows);
  // x_ += xb_ after a block: left to the next RMSNorm of x_, which does both in one kernel (bert's
  // LayerNorm reads x_ at once: added there and then).
  bool residual_pending_ = false;
  void add_residual() {
    if (post_layernorm()) {
      add(x_, xb_, int64_t(n_) * E_, stream_);
    } else {
      residual_pending_ = true;
    }
  }
  void flush_residual() {
    if (residual_pending_) add(x_, xb_, int64_t(n_) * E_, stream_);
    residual_pending_ = false;
  }
  // out = rmsnorm(x_) · w, the pending residual added first, quantised for a next matmul of `next` kind
  void norm_x(const float* w, float* out, WeightKind next) {
    add_rmsnorm(x_, residual_pending_ ? xb_ : nullptr, w, out, n_, E_, hp_.rms_eps, act_, act_format(next), stream_);
    residual_pending_ = false;
  }
  void download_outputs(int n_logit_rows, float* logits, float* hidden);
  PagedLayer paged(int l) const {
    __half* k = kv_ + int64_t(l) * 2 * page_tokens_ * KV_;
    return PagedLayer{k, k + int64_t(page_tokens_) * KV_, page_stride_, page_tokens_, KV_};
  }
};

GpuBackend::GpuBackend(const model::Model& m, const model::DeviceOptions& opts, int max_rows, int page_tokens,
                       int n_pages)
    : m_(m),
      hp_(m.hparams()),
      max_rows_(max_rows),
      page_tokens_(page_tokens),
      n_pages_(n_pages),
      E_(hp_.n_embd),
      Q_(hp_.q_dim()),
      KV_(hp_.kv_dim()),
      HD_(hp_.head_dim),
      F_(hp_.ffn_width()),
      half_(hp_.n_rot / 2),
      recipe_(m.recipe()) {
  if (max_rows <= 0 || page_tokens <= 0 || n_pages <= 0) {
    throw std::invalid_argument("cuda backend: max_rows, page_tokens and n_pages must be positive");
  }
  if (HD_ > 256) {
    throw std::runtime_error("cuda backend: head_dim " + std::to_string(HD_) + " is over the 256 its attention takes");
  }
  page_stride_ = int64_t(hp_.n_layer) * 2 * page_tokens * KV_;
  kv_bytes_ = uint64_t(page_stride_) * uint64_t(n_pages) * sizeof(__half);

  // Plan first: the KV pool and the scratch, then the weights in what is left of the GPU's free memory
  // (or of the budget): all resident, or the first layers that fit and the rest streamed.
  const uint64_t R = uint64_t(max_rows);
  uint64_t scratch = R * (4 * uint64_t(E_) + 2 * uint64_t(Q_) + 2 * uint64_t(KV_) + 2 * uint64_t(F_) +
                          uint64_t(std::max(hp_.n_vocab, 1)) + 4 * uint64_t(half_) + 4) * sizeof(float);
  if (hp_.is_moe()) {
    const uint64_t K = uint64_t(hp_.n_expert_used);
    scratch += R * (uint64_t(hp_.n_expert) + 2 * uint64_t(E_) + K * uint64_t(E_) + 3 * K) * sizeof(float);
  }
  scratch += R * uint64_t(widest_input()) * (32 + sizeof(float)) / 32;  // int8 codes and a scale per 32
  scratch += 64ull << 20;  // the GELU table, page tables and the allocator's rounding: well under this
  const std::optional<DeviceInfo> dev = device_info();
  if (!dev) throw std::runtime_error("cuda backend: no CUDA device");
  const uint64_t budget = opts.vram_budget > 0 ? std::min<uint64_t>(opts.vram_budget, dev->free_bytes) : dev->free_bytes;
  const std::string where = " (" + dev->name + ": " + mib(dev->free_bytes) + " free of " + mib(dev->total_bytes) +
                            (opts.vram_budget > 0 ? ", budget " + mib(opts.vram_budget) : "") + ")";
  if (kv_bytes_ + scratch >= budget) {
    throw std::runtime_error("cuda backend: the KV pool (" + mib(kv_bytes_) + ") and the scratch (" + mib(scratch) +
                             ") alone need more than the " + mib(budget) + " available" + where);
  }
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  try {
    upload_weights(opts, budget - kv_bytes_ - scratch);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("cuda backend: ") + e.what() + where);
  }
  kv_ = arena_.alloc<__half>(size_t(page_stride_) * size_t(n_pages));
  allocate_scratch();
  const std::string mode =
      plan_.streams() ? "streaming " + std::to_string(hp_.n_layer - plan_.resident_layers) + " of " +
                            std::to_string(hp_.n_layer) + " layers through " + std::to_string(plan_.depth) +
                            " slots of " + mib(plan_.slot_bytes) + " (" + mib(plan_.streamed_bytes_per_pass) + " a pass)"
                      : std::string("resident");
  description_ = "cuda, " + dev->name + " (sm_" + std::to_string(dev->compute_major) + std::to_string(dev->compute_minor) +
                 ", " + std::to_string(dev->multiprocessors) + " SMs), " + mode + ", weights on the GPU " +
                 mib(stream_device_->allocated_bytes() + arena_.bytes() - kv_bytes_) + ", KV " + std::to_string(n_pages) +
                 " pages of " + std::to_string(page_tokens) + " tokens (" + mib(kv_bytes_) + ")";
}

GpuMatrix GpuBackend::upload(const kernels::WeightMatrix& w) {
  if (!w.data) return {};
  const uint64_t bytes = bytes_on_gpu(w);
  char* dst = arena_.alloc<char>(bytes);
  if (gpu_reads_as_stored(w)) {
    check(cudaMemcpy(dst, w.data, bytes, cudaMemcpyHostToDevice), "upload weights");
  } else {
    std::vector<uint8_t> staging(bytes);
    write_gpu_format(w, staging.data());
    check(cudaMemcpy(dst, staging.data(), bytes, cudaMemcpyHostToDevice), "upload weights");
  }
  kernels::WeightMatrix g = gpu_format(w);
  g.data = dst;
  return as_gpu(g);
}

const float* GpuBackend::upload(const float* v, int64_t n) {
  if (!v) return nullptr;
  float* d = arena_.alloc<float>(size_t(n));
  check(cudaMemcpy(d, v, size_t(n) * sizeof(float), cudaMemcpyHostToDevice), "upload vector");
  return d;
}

// The non-layer weights into the arena; the layers in the GPU's format on the host (converted where the
// file's layout is not the GPU's; streamed layers page-locked, so their copies overlap the compute),
// planned against `layer_budget` and handed to the streamer.
void GpuBackend::upload_weights(const model::DeviceOptions& opts, uint64_t layer_budget) {
  const uint64_t arena_before = arena_.bytes();
  if (hp_.has_classifier()) {
    output_ = upload(m_.output());
    output_bias_ = upload(m_.output_bias(), hp_.n_vocab);
  }
  output_norm_ = upload(m_.output_norm(), E_);
  std::vector<uint16_t> table(65536);
  for (uint32_t h = 0; h < 65536; ++h) table[h] = kernels::gelu_table_entry(uint16_t(h));
  uint16_t* t = arena_.alloc<uint16_t>(table.size());
  check(cudaMemcpy(t, table.data(), table.size() * 2, cudaMemcpyHostToDevice), "upload GELU table");
  gelu_table_ = t;
  const uint64_t other = arena_.bytes() - arena_before;
  if (other >= layer_budget) {
    throw std::runtime_error("the embeddings, classifier and norms (" + mib(other) + ") do not fit the " +
                             mib(layer_budget) + " left beside the KV pool and scratch");
  }

  for (const model::LayerWeights& L : m_.layers()) {
    model::LayerWeights g = L;
    for_each_matrix(g, [](kernels::WeightMatrix& w) {
      if (w.data) w = gpu_format(w);
    });
    host_layers_.push_back(g);
  }
  model::StreamPlanInput in;
  for (const model::LayerWeights& L : host_layers_) in.layer_bytes.push_back(model::layer_layout(hp_, L).bytes);
  in.other_bytes = 0;  // already allocated, taken off the budget
  in.budget_bytes = layer_budget - other;
  in.resident_layers = opts.gpu_layers;
  plan_ = model::plan_streaming(in);

  // The host bytes each layer is copied from: the file's own where the GPU reads them as stored
  // (resident layers, copied once), else a converted copy; streamed layers all in page-locked memory.
  uint64_t pinned = 0, staged = 0;
  for (int l = 0; l < hp_.n_layer; ++l) {
    for_each_matrix(m_.layers()[size_t(l)], [&](const kernels::WeightMatrix& w) {
      if (!w.data) return;
      if (l >= plan_.resident_layers) pinned += bytes_on_gpu(w);
      else if (!gpu_reads_as_stored(w)) staged += bytes_on_gpu(w);
    });
  }
  std::vector<uint8_t> staging(staged);
  uint8_t* pin = pinned ? streamed_host_.reserve(pinned) : nullptr;
  uint8_t* stage = staging.data();
  for (int l = 0; l < hp_.n_layer; ++l) {
    const model::LayerWeights& src = m_.layers()[size_t(l)];
    model::LayerWeights& dst = host_layers_[size_t(l)];
    const bool streamed = l >= plan_.resident_layers;
    auto place = [&](const kernels::WeightMatrix& w, kernels::WeightMatrix& g) {
      if (!w.data || (!streamed && gpu_reads_as_stored(w))) return;
      uint8_t*& at = streamed ? pin : stage;
      write_gpu_format(w, at);
      g.data = at;
      at += bytes_on_gpu(w);
    };
    place(src.wq, dst.wq);
    place(src.wk, dst.wk);
    place(src.wv, dst.wv);
    place(src.wo, dst.wo);
    place(src.w_gate, dst.w_gate);
    place(src.w_up, dst.w_up);
    place(src.w_down, dst.w_down);
    place(src.router, dst.router);
    place(src.gate_exps, dst.gate_exps);
    place(src.up_exps, dst.up_exps);
    place(src.down_exps, dst.down_exps);
  }
  stream_device_ = std::make_unique<CudaStreamDevice>(stream_);
  streamer_ = std::make_unique<model::LayerStreamer>(hp_, host_layers_, plan_, *stream_device_,
                                                     model::LayerStreamer::Options{});
  // The resident layers' views are fixed: converted once (the graphs capture them). Their host copies
  // (`staging`) are not read again: the streamer reads only the streamed layers' host bytes.
  for (int l = 0; l < plan_.resident_layers; ++l) {
    resident_.push_back(as_gpu(streamer_->acquire(l)));
    streamer_->release(l);
  }
}

void GpuBackend::allocate_scratch() {
  const size_t R = size_t(max_rows_);
  x_ = arena_.alloc<float>(R * E_);
  xb_ = arena_.alloc<float>(R * E_);
  final_ = arena_.alloc<float>(R * E_);
  q_ = arena_.alloc<float>(R * Q_);
  att_ = arena_.alloc<float>(R * Q_);
  k_ = arena_.alloc<float>(R * KV_);
  v_ = arena_.alloc<float>(R * KV_);
  hb_ = arena_.alloc<float>(R * F_);
  hb2_ = arena_.alloc<float>(R * F_);
  logits_ = arena_.alloc<float>(hp_.has_classifier() ? R * size_t(hp_.n_vocab) : 1);
  float* angles = arena_.alloc<float>(4 * R * size_t(std::max(half_, 1)));
  cos_ = angles;
  sin_ = cos_ + R * half_;
  cos_swa_ = sin_ + R * half_;
  sin_swa_ = cos_swa_ + R * half_;
  rows_i_ = arena_.alloc<int>(4 * R);
  act_.capacity = int64_t(R) * widest_input();
  act_.codes = arena_.alloc<int8_t>(size_t(act_.capacity));
  act_.scales = arena_.alloc<float>(size_t(act_.capacity / 32));
  if (hp_.is_moe()) {
    const size_t K = size_t(hp_.n_expert_used);
    router_ = arena_.alloc<float>(R * hp_.n_expert);
    moe_in_ = arena_.alloc<float>(R * E_);
    moe_y_ = arena_.alloc<float>(R * E_);
    moe_out_ = arena_.alloc<float>(R * K * E_);
    route_w_ = arena_.alloc<float>(R * K);
    moe_index_ = arena_.alloc<int>(2 * R * K);
    h_router_.reserve(R * hp_.n_expert);
    h_route_w_.reserve(R * K);
    h_moe_index_.reserve(2 * R * K);
    route_expert_.resize(R * K);
    router_margins_.resize(size_t(hp_.n_layer) * R);
  }
  h_x_.reserve(R * E_);
  h_angles_.reserve(4 * R * size_t(std::max(half_, 1)));
  h_rows_i_.reserve(4 * R);
  embed_scratch_.resize(size_t(E_));
  grow_page_tables(R * 4);
}

// Page tables grow with the contexts they cover; a few bytes per page, reallocated rarely.
void GpuBackend::grow_page_tables(size_t n) {
  if (n <= page_table_cap_) return;
  const size_t cap = std::max(n, 2 * page_table_cap_);
  drop_graphs();  // they hold the old table's address
  if (page_tables_) check(cudaFree(page_tables_), "cudaFree");
  page_tables_ = nullptr;
  check(cudaMalloc(&page_tables_, cap * sizeof(int)), "cudaMalloc page tables");
  h_pt_.reserve(cap);
  page_table_cap_ = cap;
}

void GpuBackend::prepare_inputs(const model::Batch& batch) {
  const int n = n_;
  const size_t R = size_t(max_rows_);
  const kernels::RopeParams rope = model::rope_params(hp_, recipe_, m_.rope_factors(), false);
  const kernels::RopeParams rope_swa = model::rope_params(hp_, recipe_, nullptr, true);
  float* hx = h_x_.get();
  float* ha = h_angles_.get();
  for (int r = 0; r < n; ++r) {
    const model::BatchRow& row = batch.rows[size_t(r)];
    model::embed_row(m_, row.token, row.pos, hx + size_t(r) * E_, embed_scratch_.data());
    if (!recipe_.rope()) continue;
    kernels::rope_angles(row.pos, rope, ha + size_t(r) * half_, ha + R * half_ + size_t(r) * half_);
    if (hp_.n_swa > 0) {
      kernels::rope_angles(row.pos, rope_swa, ha + 2 * R * half_ + size_t(r) * half_,
                           ha + 3 * R * half_ + size_t(r) * half_);
    }
  }
  // Each sequence's visible end (non-causal: its last position in the batch + 1) and page table,
  // the pages up to the last one a row of it reads.
  seq_end_.assign(batch.seqs.size(), 0);
  for (const model::BatchRow& row : batch.rows) seq_end_[size_t(row.seq)] = std::max(seq_end_[size_t(row.seq)], row.pos + 1);
  seq_pt_offset_.assign(batch.seqs.size(), 0);
  size_t pt_total = 0;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    seq_pt_offset_[s] = int(pt_total);
    if (seq_end_[s] > 0) pt_total += size_t((seq_end_[s] - 1) / page_tokens_ + 1);
  }
  grow_page_tables(pt_total);
  int* hpt = h_pt_.get();
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    if (seq_end_[s] == 0) continue;
    const int pages = (seq_end_[s] - 1) / page_tokens_ + 1;
    std::memcpy(hpt + seq_pt_offset_[s], batch.seqs[s].page_table, size_t(pages) * sizeof(int));
  }
  int* hi = h_rows_i_.get();
  for (int r = 0; r < n; ++r) {
    const model::BatchRow& row = batch.rows[size_t(r)];
    hi[r] = row.pos;
    hi[R + r] = hp_.causal ? row.pos + 1 : seq_end_[size_t(row.seq)];
    hi[2 * R + r] = seq_pt_offset_[size_t(row.seq)];
  }
  for (size_t i = 0; i < out_rows_.size(); ++i) hi[3 * R + i] = out_rows_[i];

  cudaStream_t s = stream_;
  check(cudaMemcpyAsync(x_, hx, size_t(n) * E_ * sizeof(float), cudaMemcpyHostToDevice, s), "upload rows");
  // the first n rows of each section (cos, sin, and the local layers' pair; pos, end, page-table
  // offset, output rows), not the whole max_rows
  for (size_t part = 0; part < 4 && recipe_.rope(); ++part) {
    if (part >= 2 && hp_.n_swa == 0) break;
    check(cudaMemcpyAsync(cos_ + part * R * half_, ha + part * R * half_, size_t(n) * half_ * sizeof(float),
                          cudaMemcpyHostToDevice, s),
          "upload angles");
  }
  for (size_t part = 0; part < 4; ++part) {
    const size_t count = part == 3 ? out_rows_.size() : size_t(n);
    if (count == 0) continue;
    check(cudaMemcpyAsync(rows_i_ + part * R, hi + part * R, count * sizeof(int), cudaMemcpyHostToDevice, s),
          "upload row data");
  }
  check(cudaMemcpyAsync(page_tables_, hpt, std::max<size_t>(pt_total, 1) * sizeof(int), cudaMemcpyHostToDevice, s),
        "upload page tables");
  rows_view_ = RowsView{rows_i_, rows_i_ + R, rows_i_ + 2 * R, page_tables_, n};
}

void GpuBackend::run(const model::Batch& batch, float* logits, float* hidden, model::PassProfile* profile) {
  const int n_logit_rows = model::check_run(hp_, batch, page_tokens_, n_pages_, max_rows_, out_rows_, logits, hidden);
  if (batch.rows.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  n_ = int(batch.rows.size());
  prepare_inputs(batch);
  const int logit_rows = logits ? n_logit_rows : 0;
  if (!hp_.is_moe() && !plan_.streams() && n_ <= kGraphRows) {
    launch_captured(logit_rows);
  } else {
    compute(logit_rows);
  }
  download_outputs(logit_rows, logits, hidden);
  check(cudaStreamSynchronize(stream_), "forward pass");
  if (profile) profile->other_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void GpuBackend::compute(int n_logit_rows) {
  residual_pending_ = false;  // x_ holds this pass's embeddings
  for (int l = 0; l < hp_.n_layer; ++l) {
    layer_ = l;
    const bool resident = l < plan_.resident_layers;
    const GpuLayer L = resident ? resident_[size_t(l)] : as_gpu(streamer_->acquire(l));
    attention_block(l, L);
    feed_forward_block(l, L);
    if (!resident) streamer_->release(l);  // the slot is refilled once these kernels are done
  }
  output_kernels(n_logit_rows);
}

void GpuBackend::launch_captured(int n_logit_rows) {
  const GraphKey key{n_, int(out_rows_.size()), n_logit_rows};
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (graphs_.size() >= kMaxGraphs) drop_graphs();
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "graph capture");
    cudaGraph_t graph = nullptr;
    try {
      compute(n_logit_rows);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    check(cudaStreamEndCapture(stream_, &graph), "graph capture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(e, "graph instantiate");
    it = graphs_.emplace(key, exec).first;
  }
  check(cudaGraphLaunch(it->second, stream_), "graph launch");
}

void GpuBackend::attention_block(int l, const GpuLayer& L) {
  cudaStream_t s = stream_;
  const int n = n_;
  const float eps = hp_.rms_eps;
  const model::LayerRecipe& R = recipe_.layers[size_t(l)];
  const float* in = x_;
  if (R.norm == model::NormPlacement::PreRms) {
    norm_x(L.attn_norm, xb_, L.wq.kind);
    in = xb_;
  }
  const MatmulOutput qkv[] = {{L.wq, q_, Q_}, {L.wk, k_, KV_}, {L.wv, v_, KV_}};
  matmul_shared(qkv, in, E_, n, act_, s);
  add_bias(q_, L.bq, n, Q_, s);
  add_bias(k_, L.bk, n, KV_, s);
  add_bias(v_, L.bv, n, KV_, s);
  const HeadNorms norms{R.qk_norm ? L.q_norm : nullptr, R.qk_norm ? L.k_norm : nullptr, eps};
  const PagedLayer kv = paged(l);
  rope_store(q_, hp_.n_head, k_, v_, hp_.n_kv_head, HD_, norms, R.local() ? cos_swa_ : cos_, R.local() ? sin_swa_ : sin_,
             half_, R.rope == model::RopeKind::Halves, R.rope != model::RopeKind::None, kv, rows_view_, s);
  attention(q_, att_, kv, rows_view_, hp_.n_head, hp_.n_kv_head, HD_, hp_.attn_scale, R.window, s);
  matmul(L.wo, att_, Q_, n, xb_, E_, act_, s);
  add_bias(xb_, L.bo, n, E_, s);
  if (R.post_block_norms) rmsnorm(xb_, E_, nullptr, L.post_attn_norm, xb_, E_, n, E_, eps, s);
  add_residual();
  if (post_layernorm()) layernorm(x_, n, E_, L.attn_out_norm, L.attn_out_norm_b, eps, s);
}

void GpuBackend::feed_forward_block(int l, const GpuLayer& L) {
  cudaStream_t s = stream_;
  const int n = n_;
  const float eps = hp_.rms_eps;
  const model::LayerRecipe& R = recipe_.layers[size_t(l)];
  // the block's input: RMSNorm(x) quantised for its first matmul (PreRms), or x itself
  const float* in = x_;
  if (R.norm == model::NormPlacement::PreRms) {
    const GpuMatrix& first = R.ffn == model::FeedForwardKind::Experts ? L.router
                             : R.ffn == model::FeedForwardKind::GeluUp ? L.w_up
                                                                       : L.w_gate;
    norm_x(L.ffn_norm, xb_, first.kind);
    in = xb_;
  }
  switch (R.ffn) {
    case model::FeedForwardKind::Experts:
      moe_block(L, in);
      break;
    case model::FeedForwardKind::GeluUp:
      matmul(L.w_up, in, E_, n, hb_, F_, act_, s);
      bias_gelu(hb_, L.b_up, n, F_, gelu_table_, s);
      matmul(L.w_down, hb_, F_, n, xb_, E_, act_, s);
      add_bias(xb_, L.b_down, n, E_, s);
      break;
    case model::FeedForwardKind::SwiGlu:
    case model::FeedForwardKind::GeGlu: {
      const MatmulOutput gate_up[] = {{L.w_gate, hb_, F_}, {L.w_up, hb2_, F_}};
      matmul_shared(gate_up, in, E_, n, act_, s);
      if (R.ffn == model::FeedForwardKind::GeGlu) {
        geglu(hb_, hb2_, n, F_, gelu_table_, act_, act_format(L.w_down.kind), s);
      } else {
        swiglu(hb_, hb2_, n, F_, act_, act_format(L.w_down.kind), s);
      }
      matmul(L.w_down, hb_, F_, n, xb_, E_, act_, s);
      break;
    }
  }
  if (R.post_block_norms) rmsnorm(xb_, E_, nullptr, L.post_ffn_norm, xb_, E_, n, E_, eps, s);
  add_residual();
  if (post_layernorm()) layernorm(x_, n, E_, L.layer_out_norm, L.layer_out_norm_b, eps, s);
}

// The router runs on the GPU over the block's input rows `in`, the choice of experts on the host (the
// CPU's own routing), then expert by expert the rows routed to it are gathered, run and scattered to
// their (row, choice) slot.
void GpuBackend::moe_block(const GpuLayer& L, const float* in) {
  cudaStream_t s = stream_;
  const int n = n_, NE = hp_.n_expert, K = hp_.n_expert_used, FE = hp_.n_ff_exp;
  matmul(L.router, in, E_, n, router_, NE, act_, s);
  float* hr = h_router_.get();
  check(cudaMemcpyAsync(hr, router_, size_t(n) * NE * sizeof(float), cudaMemcpyDeviceToHost, s), "router download");
  check(cudaStreamSynchronize(s), "router");
  float* hw = h_route_w_.get();
  for (int r = 0; r < n; ++r) {
    router_margins_[size_t(layer_) * size_t(max_rows_) + size_t(r)] =
        model::route_row(hr + size_t(r) * NE, NE, K, &route_expert_[size_t(r) * K], hw + size_t(r) * K);
  }
  // per expert, contiguous: the source rows, then (at + n·K) their (row, choice) slots
  int* hi = h_moe_index_.get();
  std::vector<int> first(size_t(NE) + 1, 0);
  for (int slot = 0; slot < n * K; ++slot) ++first[size_t(route_expert_[size_t(slot)]) + 1];
  for (int e = 0; e < NE; ++e) first[size_t(e) + 1] += first[size_t(e)];
  std::vector<int> fill(first.begin(), first.end() - 1);
  for (int slot = 0; slot < n * K; ++slot) {
    const int at = fill[size_t(route_expert_[size_t(slot)])]++;
    hi[at] = slot / K;
    hi[n * K + at] = slot;
  }
  check(cudaMemcpyAsync(moe_index_, hi, size_t(2 * n * K) * sizeof(int), cudaMemcpyHostToDevice, s), "route upload");
  check(cudaMemcpyAsync(route_w_, hw, size_t(n * K) * sizeof(float), cudaMemcpyHostToDevice, s), "route upload");
  for (int e = 0; e < NE; ++e) {
    const int rows = first[size_t(e) + 1] - first[size_t(e)];
    if (rows == 0) continue;
    const int at = first[size_t(e)];
    gather_rows(in, moe_index_ + at, rows, E_, moe_in_, s);
    const MatmulOutput gate_up[] = {{L.gate_exps.rows(int64_t(e) * FE, FE), hb_, FE},
                                     {L.up_exps.rows(int64_t(e) * FE, FE), hb2_, FE}};
    matmul_shared(gate_up, moe_in_, E_, rows, act_, s);
    swiglu(hb_, hb2_, rows, FE, act_, act_format(L.down_exps.kind), s);
    matmul(L.down_exps.rows(int64_t(e) * E_, E_), hb_, FE, rows, moe_y_, E_, act_, s);
    scatter_rows(moe_y_, moe_index_ + n * K + at, rows, E_, moe_out_, s);
  }
  moe_combine(moe_out_, route_w_, n, K, E_, xb_, s);
}

void GpuBackend::output_kernels(int n_logit_rows) {
  const int n_out = int(out_rows_.size());
  if (n_out == 0) return;
  cudaStream_t s = stream_;
  flush_residual();
  const int* out_index = rows_i_ + 3 * max_rows_;
  if (recipe_.final_rmsnorm()) {
    rmsnorm(x_, E_, out_index, output_norm_, final_, E_, n_out, E_, hp_.rms_eps, s);
  } else {
    gather_rows(x_, out_index, n_out, E_, final_, s);
  }
  if (n_logit_rows > 0) {
    const int V = hp_.n_vocab;
    matmul(output_, final_, E_, n_logit_rows, logits_, V, act_, s);
    add_bias(logits_, output_bias_, n_logit_rows, V, s);
    if (hp_.logit_softcap > 0.f) softcap(logits_, int64_t(n_logit_rows) * V, hp_.logit_softcap, s);
  }
}

void GpuBackend::download_outputs(int n_logit_rows, float* logits, float* hidden) {
  const int n_out = int(out_rows_.size());
  if (hidden && n_out > 0) {
    check(cudaMemcpyAsync(hidden, final_, size_t(n_out) * E_ * sizeof(float), cudaMemcpyDeviceToHost, stream_),
          "hidden download");
  }
  if (n_logit_rows > 0) {
    check(cudaMemcpyAsync(logits, logits_, size_t(n_logit_rows) * hp_.n_vocab * sizeof(float), cudaMemcpyDeviceToHost,
                          stream_),
          "logits download");
  }
}

void GpuBackend::copy_page(int32_t from, int32_t to, int n_tokens) {
  if (from < 0 || from >= n_pages_ || to < 0 || to >= n_pages_ || n_tokens < 0 || n_tokens > page_tokens_) {
    throw std::out_of_range("copy_page: page or token count out of range");
  }
  const size_t bytes = size_t(n_tokens) * KV_ * sizeof(__half);
  for (int l = 0; l < hp_.n_layer; ++l) {
    const PagedLayer kv = paged(l);
    for (__half* base : {kv.k, kv.v}) {
      check(cudaMemcpyAsync(base + int64_t(to) * page_stride_, base + int64_t(from) * page_stride_, bytes,
                            cudaMemcpyDeviceToDevice, stream_),
            "copy_page");
    }
  }
  check(cudaStreamSynchronize(stream_), "copy_page");
}

}  // namespace

std::unique_ptr<model::Backend> make_gpu_backend(const model::Model& model, const model::DeviceOptions& opts,
                                                 int max_rows, int page_tokens, int n_pages) {
  return std::make_unique<GpuBackend>(model, opts, max_rows, page_tokens, n_pages);
}

}  // namespace infer::cuda
