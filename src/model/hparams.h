// Hyper-parameters of a model, read from GGUF metadata (spec/architectures.md §1; gemma3, phi3,
// qwen3moe and bert: spec/architectures-more.md).
#pragma once
#include <cstdint>
#include <string>

#include "gguf/file.h"

namespace infer::model {

enum class Arch { Llama, Qwen2, Qwen3, Gemma3, Phi3, Qwen3Moe, Bert };

// general.architecture's name of `arch`.
const char* arch_name(Arch arch);

struct HParams {
  Arch arch = Arch::Llama;
  std::string arch_name;   // general.architecture
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;        // qwen3: attention.key_length; else n_embd / n_head
  int n_ff = 0;
  int n_rot = 0;           // rope.dimension_count, default head_dim
  float rms_eps = 1e-5f;    // ε of the model's norms (RMSNorm; bert: LayerNorm)
  float rope_freq_base = 10000.f;
  float rope_freq_scale = 1.f;  // 1 / rope.scaling.factor for linear scaling
  float rope_mscale = 1.f;      // rope.scaling.attn_factor: magnitude of the rotation (cos and sin × it)
  int n_ctx_orig = 0;           // rope.scaling.original_context_length (default n_ctx_train): LongRoPE
                                // uses its long factors when the per-sequence context exceeds it
  bool tied_output = false;     // no output.weight: reuse token_embd
  bool causal = true;           // bert: false, every token sees its whole sequence
  float attn_scale = 0.f;       // factor of q·k before the softmax (1/sqrt(head_dim) unless the arch says)
  float embd_scale = 1.f;       // gemma3: token embeddings are multiplied by sqrt(n_embd)
  float logit_softcap = 0.f;    // gemma3 final_logit_softcapping c: logits = c·tanh(logits/c); 0 off
  int n_swa = 0;                // gemma3 sliding window: a local layer sees the n_swa positions up to its own
  int swa_pattern = 0;          // layer il is local iff il % swa_pattern < swa_pattern - 1 (n_swa > 0)
  float rope_freq_base_swa = 10000.f;  // RoPE base of the local layers
  int n_expert = 0;             // qwen3moe: experts per layer, of which n_expert_used run per token
  int n_expert_used = 0;
  int n_ff_exp = 0;             // one expert's feed-forward width
  int pooling_type = -1;        // <arch>.pooling_type, llama.cpp's enum (0 none, 1 mean, 2 cls, 3 last,
                                // 4 rank): how the model's embeddings are meant to be pooled; -1 absent

  bool is_local_layer(int il) const { return n_swa > 0 && il % swa_pattern < swa_pattern - 1; }
  bool is_moe() const { return n_expert > 0; }
  bool has_classifier() const { return arch != Arch::Bert; }  // bert files are embedders: no logits
  int ffn_width() const { return is_moe() ? n_ff_exp : n_ff; }  // width of the hidden FFN activations

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_kv_head * head_dim; }
  // Bytes of KV cache one token needs with F16 storage: layers × 2 (K,V) × kv_dim × 2 bytes.
  uint64_t kv_bytes_per_token() const { return uint64_t(n_layer) * 2 * kv_dim() * 2; }
};

// Reads and validates hyper-parameters; throws std::runtime_error naming the missing/bad key, or the
// unsupported architecture.
HParams read_hparams(const gguf::File& file);

}  // namespace infer::model
