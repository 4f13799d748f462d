// A loaded model: hyper-parameters plus weight views into the GGUF file's memory (its mapping or its
// huge-page copy; never a second copy, DESIGN invariant 1), and the forward pass over a batch of
// (sequence, position, token) rows.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gguf/file.h"
#include "kernels/matmul/matmul.h"
#include "kernels/runtime/thread_pool.h"
#include "model/hparams.h"
#include "model/kv_pool.h"
#include "model/layer_recipe.h"
#include "model/pass_profile.h"

namespace infer::model {

struct LoadOptions {
  bool prefetch = false;  // MADV_WILLNEED the weights (mapped files only)
  bool mlock = false;
  bool mmap = false;      // map the file (shared page cache) instead of copying it into huge pages
  // Tokens one sequence may hold (the engine's per-sequence context); 0 = the training context.
  // LongRoPE models pick their long or short factors from it, once (see Model::rope_long()).
  int context = 0;
};
// A copy (not mmap) has its matrices rewritten into the interleaved layout where this CPU has kernels
// for it (kernels/quant/interleave.h: Q8_0, Q4_0 and the K-quants with AVX-512 VNNI), for faster decode and batches; see
// interleaved_matrices().

// One layer's tensors; which are set depends on the architecture (null / empty when absent).
struct LayerWeights {
  const float* attn_norm = nullptr;                 // [n_embd] pre-attention norm (not bert)
  kernels::WeightMatrix wq, wk, wv, wo;             // phi3: row ranges of the fused attn_qkv
  const float* bq = nullptr; const float* bk = nullptr; const float* bv = nullptr;  // qwen2, bert biases
  const float* bo = nullptr;                                                        // bert
  const float* q_norm = nullptr; const float* k_norm = nullptr;  // qwen3, qwen3moe, gemma3 [head_dim]
  const float* post_attn_norm = nullptr;            // gemma3: RMSNorm of the attention output
  const float* attn_out_norm = nullptr; const float* attn_out_norm_b = nullptr;    // bert post-LN
  const float* ffn_norm = nullptr;                  // pre-FFN norm (not bert)
  kernels::WeightMatrix w_gate, w_up, w_down;       // phi3: gate and up are halves of the fused ffn_up
  const float* b_up = nullptr; const float* b_down = nullptr;                       // bert
  const float* post_ffn_norm = nullptr;             // gemma3: RMSNorm of the FFN output
  const float* layer_out_norm = nullptr; const float* layer_out_norm_b = nullptr;  // bert post-LN
  // qwen3moe: the router [n_embd → n_expert] and the experts' matrices, expert e at expert(w, e)
  kernels::WeightMatrix router, gate_exps, up_exps, down_exps;
};

// Expert e's matrix of a stacked 3-D expert tensor whose WeightMatrix spans all experts' rows.
kernels::WeightMatrix expert(const kernels::WeightMatrix& stacked, int e, int n_expert);

class Model {
 public:
  // Opens the file (by default copied onto huge pages, O(file size); with opts.mmap mapped, O(metadata)),
  // reads hparams and binds every tensor; throws std::runtime_error naming the missing or mis-shaped
  // tensor, or the unsupported architecture / weight type.
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& opts = {});
  // Same, over an already opened file (e.g. gguf::File::from_memory in tests); takes ownership.
  static std::unique_ptr<Model> from_file(std::unique_ptr<gguf::File> file, int context = 0);

  const HParams& hparams() const { return hp_; }
  // How each layer runs (layer_recipe.h): what both backends execute.
  const ModelRecipe& recipe() const { return recipe_; }
  const gguf::File& file() const { return *file_; }
  uint64_t weight_bytes() const;  // bytes of all tensors
  // What one token's decode reads, about: weight_bytes() with each expert stack counted at
  // n_expert_used / n_expert of its size (a token runs only its chosen experts); dense models: all.
  uint64_t active_weight_bytes() const;
  int interleaved_matrices() const { return interleaved_matrices_; }  // tensors in the interleaved layout
  // The (weight type, interleaved) pairs of the matrices the forward pass multiplies: what to ask
  // kernels::describe_plans about.
  std::set<std::pair<kernels::TensorType, bool>> matmul_kinds() const;

  // F32-only tensors (norms, biases) are pointed to directly; other small vectors are dequantised once.
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const kernels::WeightMatrix& token_embd() const { return token_embd_; }
  const kernels::WeightMatrix& output() const { return output_; }
  const float* output_norm() const { return output_norm_; }
  const float* output_bias() const { return output_bias_; }  // qwen2 `output.bias` [n_vocab], or null
  // The RoPE divisors [n_rot/2] the forward pass uses, or null: llama3's `rope_freqs.weight`, else the
  // LongRoPE factors chosen at load (`rope_factors_long` when rope_long(), else `rope_factors_short`).
  const float* rope_factors() const { return rope_factors_; }
  // LongRoPE: whether the long factors were chosen, as llama.cpp chooses them: the per-sequence context
  // rounded up to a multiple of 256 exceeds rope.scaling.original_context_length (spec §4.5).
  bool rope_long() const { return rope_long_; }
  // bert's input embeddings: position rows [n_ctx_train × n_embd], token type 0's row, and their LayerNorm
  const kernels::WeightMatrix& position_embd() const { return position_embd_; }
  const float* token_type0() const { return token_type0_; }
  const float* embd_norm() const { return embd_norm_; }
  const float* embd_norm_bias() const { return embd_norm_b_; }

 private:
  Model() = default;
  std::unique_ptr<gguf::File> file_;
  HParams hp_;
  ModelRecipe recipe_;
  std::vector<LayerWeights> layers_;
  kernels::WeightMatrix token_embd_{}, output_{};
  const float* output_norm_ = nullptr;
  const float* output_bias_ = nullptr;
  const float* rope_factors_ = nullptr;
  bool rope_long_ = false;
  kernels::WeightMatrix position_embd_{};
  const float* token_type0_ = nullptr;
  const float* embd_norm_ = nullptr;
  const float* embd_norm_b_ = nullptr;
  std::vector<std::vector<float>> owned_small_;  // dequantised norm/bias vectors when not F32
  int interleaved_matrices_ = 0;

  void interleave_matrices();
};

// One row of a batch: sequence `seq` (index into Batch::seqs) at position `pos` with input `token`.
// Rows of one sequence appear in increasing position order; a row attends to positions 0..pos of its
// sequence, which must already be in the KV pool or be earlier rows of this batch.
struct BatchRow {
  int seq;
  int pos;
  int32_t token;
  bool want_logits;           // write this row's logits (and hidden state, when asked) to the output
  bool want_hidden = false;   // write only this row's final-normed hidden state, skipping the classifier
                              // (embeddings); ignored when want_logits is set
};

struct SeqPages {
  const int32_t* page_table;  // covers positions 0..max pos of this sequence's rows
  int n_pages;
};

struct Batch {
  std::vector<BatchRow> rows;
  std::vector<SeqPages> seqs;
};

// A mixture-of-experts routing decision of one row in one layer: the router probability of the least
// likely expert chosen and of the most likely one not chosen. When they nearly tie, an engine that
// rounds differently may choose the other expert (spec architectures-more.md §3.4).
struct RouterMargin {
  float last_chosen = 0.f;
  float first_unchosen = 0.f;
};

// Where the forward pass reads each layer's weights when they do not all stay in the model's memory
// (layer streaming, layer_streamer.h): acquire(l) before layer l's first read, release(l) after its
// last, layers in increasing order, each once per pass; the reference is valid until release(l).
class LayerSource {
 public:
  virtual ~LayerSource() = default;
  virtual const LayerWeights& acquire(int layer) = 0;
  virtual void release(int layer) = 0;
};

// Scratch buffers of the forward pass, sized for up to max_rows rows; allocated once.
// Not thread-safe: one forward at a time per context.
class Forward {
 public:
  Forward(const Model& model, kernels::ThreadPool& pool, int max_rows);
  ~Forward();
  // About what the constructor allocates for max_rows rows and a pool of n_threads (memory planning
  // before a model is loaded), including the matmul activations it quantises later.
  static uint64_t scratch_bytes(const HParams& hp, int max_rows, int n_threads);

  // Runs the batch, writing K/V of every row into `kv`. For each row with want_logits, in row order,
  // writes n_vocab logits to `logits` (may be null if no row wants them). When `hidden` is not null it
  // receives the final-normed hidden state (n_embd floats) of every output row: first the want_logits
  // rows in row order, then the want_hidden-only rows in row order. `hidden` must not be null when a
  // row has want_hidden alone.
  // Invariant 7: a row's outputs are bitwise independent of the other rows and of the thread count.
  // Throws std::out_of_range (token id, position past the context or the page table, bad page) or
  // std::invalid_argument (more than max_rows rows, KV pool of another shape, hidden-only rows and no
  // `hidden`) before touching `kv`.
  // Work runs on `pool`; matmuls and attention too small to repay waking it run on the caller alone.
  // With `profile`, adds the pass's wall time per phase to it (a few clock reads per layer).
  void run(const Batch& batch, KvPool& kv, float* logits, float* hidden = nullptr, PassProfile* profile = nullptr);

  // Later runs read the layers' weights from `source` (null: from the model, the default); it must
  // outlive those runs.
  void set_layer_source(LayerSource* source) { layer_source_ = source; }

  int max_rows() const { return max_rows_; }
  // qwen3moe: row `row` of the last run's routing margin in `layer` (diagnostics and tests); throws
  // std::out_of_range for a model without experts or an index out of range.
  const RouterMargin& router_margin(int layer, int row) const;

 private:
  struct Buffers;
  struct Pass;  // one run's steps (forward.cpp)
  const Model& model_;
  kernels::ThreadPool& pool_;
  int max_rows_;
  std::unique_ptr<Buffers> buf_;
  LayerSource* layer_source_ = nullptr;
};

}  // namespace infer::model
