// Hyper-parameters of a model, read from GGUF metadata (spec/architectures.md §1).
#pragma once
#include <cstdint>
#include <string>

#include "gguf/file.h"

namespace infer::model {

enum class Arch { Llama, Qwen2, Qwen3 };

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
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.f;
  float rope_freq_scale = 1.f;  // 1 / rope.scaling.factor for linear scaling
  bool rope_neox = false;       // qwen2/qwen3: true; llama: false
  bool tied_output = false;     // no output.weight: reuse token_embd
  int pooling_type = -1;        // <arch>.pooling_type, llama.cpp's enum (0 none, 1 mean, 2 cls, 3 last,
                                // 4 rank): how the model's embeddings are meant to be pooled; -1 absent

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_kv_head * head_dim; }
  // Bytes of KV cache one token needs with F16 storage: layers × 2 (K,V) × kv_dim × 2 bytes.
  uint64_t kv_bytes_per_token() const { return uint64_t(n_layer) * 2 * kv_dim() * 2; }
};

// Reads and validates hyper-parameters; throws std::runtime_error naming the missing/bad key, or the
// unsupported architecture.
HParams read_hparams(const gguf::File& file);

}  // namespace infer::model
