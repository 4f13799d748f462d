// Random-weight GGUF files of real model shapes (`infer synth`): valid files that llama.cpp could load,
// for benchmarks and for checking the forward pass on every architecture and weight type.
//
// What is written: general.* keys, <arch>.* hyper-parameters with the exact key types of
// spec/architectures.md §1 and architectures-more.md, a real tokenizer (copied from a vocab file when
// one is found, else a synthetic byte-level BPE vocab of the shape's size), and every tensor the loader
// binds with the type the llama-quantize mixture rules give it (spec/quant-formats.md §9; 3-D expert
// stacks are quantised row by row like matrices). Weights are N(0, 1/sqrt(n_in)) for matrices, N(0, 1)
// for embeddings, 1 + N(0, 0.05) for norms and N(0, 0.05) for biases, so activations stay finite
// through any depth. Each row's values depend only on (seed, tensor, row): the file is the same
// whatever the thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/hparams.h"

namespace infer::model {

// Shapes of known models (`--like`), with the architecture they ship as. Fields an architecture
// does not use stay at their defaults.
struct SynthShape {
  std::string name;       // "qwen3-0.6b"
  Arch natural_arch;
  int n_vocab, n_ctx, n_embd, n_layer, n_head, n_kv_head, head_dim, n_ff;
  float rope_base, rms_eps;  // bert: rms_eps is its LayerNorm epsilon
  bool tied;              // no output.weight
  std::string vocab_file; // basename of the vocab GGUF to copy the tokenizer from ("" = synthetic)
  int n_rot = 0;          // phi3: rotated dimensions of a head (partial rotary); 0 = head_dim
  int n_swa = 0, swa_pattern = 0;  // gemma3: sliding window and its local:global layer pattern
  float rope_base_swa = 0.f;       // gemma3: RoPE base of the local layers
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // qwen3moe
  int pooling_type = -1;  // bert: 1 mean, 2 cls
  int n_ctx_orig = 0;     // LongRoPE (phi3, llama): the original context of its factors; 0 = plain RoPE
};
// Known names: see synth_shape_names(). `tiny` depends on the arch (the shapes of
// shared/reference/models/tiny-*). Throws std::invalid_argument for an unknown name, and for a shape
// of gemma3, phi3, qwen3moe or bert asked for as another architecture (or the reverse): only llama,
// qwen2 and qwen3 share shapes.
SynthShape synth_shape(std::string_view like, Arch arch);
std::vector<std::string> synth_shape_names();
// The architecture shape `like` ships as (llama for `tiny`); throws std::invalid_argument when unknown.
Arch synth_natural_arch(std::string_view like);

// File types of `--type`: a plain type or a llama-quantize mixture.
enum class SynthType { F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K_M, Q5_K_M, Q6_K };
SynthType parse_synth_type(std::string_view name);  // "q4_k_m" ...; throws std::invalid_argument
uint32_t synth_file_type(SynthType t);              // general.file_type (llama_ftype)
Arch parse_arch(std::string_view name);             // general.architecture names; throws

// `use_more_bits(i, n)` of the mixture rules (§9.2).
bool use_more_bits(int i, int n);
// Type of the matrix `name` (e.g. "blk.3.ffn_down.weight", "output.weight", a 3-D expert stack
// "blk.3.ffn_down_exps.weight") with rows of `ne0` elements in a model of `n_layer` layers and
// `n_expert` experts, by the mixture rules of §9.3–9.5 (fallback included).
gguf::TensorType mixture_type(SynthType t, std::string_view name, int64_t ne0, int n_layer, bool tied,
                              int n_expert = 0);

struct SynthOptions {
  Arch arch = Arch::Llama;
  std::string like = "tiny";
  SynthType type = SynthType::F32;
  uint64_t seed = 1;
  int threads = 2;
  // Vocab files: `vocab_path` when set, else <vocab_dirs[i]>/<shape.vocab_file> for the first dir that
  // has it, else a synthetic byte-level vocab of the shape's size.
  std::string vocab_path;
  std::vector<std::string> vocab_dirs;
  // LongRoPE (phi3, llama): write rope_factors_long/short, rope.scaling.attn_factor and
  // original_context_length for this original context (> 0, below the shape's context); -1 = the
  // shape's own (phi4-mini: 4096), 0 = none. llama files also get rope.scaling.type = longrope.
  int longrope_orig_ctx = -1;
  // > 0: write this many layers of the shape instead of all of them (a large model's layer widths
  // and kernels for benchmarks, without writing the whole file).
  int n_layer = 0;
  // Called after each tensor with bytes written so far and the total (may be empty).
  std::function<void(uint64_t done, uint64_t total, const std::string& tensor)> progress;
};

struct SynthSummary {
  SynthShape shape;
  std::string vocab_source;  // the file the tokenizer came from, or "synthetic"
  uint64_t n_params = 0;
  uint64_t tensor_bytes = 0;
  size_t n_tensors = 0;
};

// Writes the file (atomically, by rename). Throws std::invalid_argument for an impossible
// combination (qwen2 and phi3 need n_head × head_dim == n_embd; LongRoPE on another architecture or
// with an original context outside (0, n_ctx)), gguf::Error on I/O failure.
// LongRoPE factors: short ones 1 + |N(0, 0.05)|; long ones rising geometrically from 1 to
// n_ctx / n_ctx_orig over the pairs, times 1 + N(0, 0.05); the magnitude is the converter's
// sqrt(1 + ln(n_ctx / n_ctx_orig) / ln(n_ctx_orig)).
SynthSummary write_synth(const SynthOptions& opts, const std::string& path);

}  // namespace infer::model
