// Hyper-parameters from GGUF metadata, with llama.cpp's exact-type rule (spec/architectures.md §1.1):
// a key of the wrong GGUF type is an error naming the key, not a silent conversion.
#include "model/hparams.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace infer::model {
namespace {

using gguf::ValueType;

std::runtime_error key_error(const std::string& key, const std::string& what) {
  return std::runtime_error("model metadata key " + key + ": " + what);
}

const gguf::Value* typed(const gguf::File& f, const std::string& key, ValueType want) {
  const gguf::Value* v = f.find(key);
  if (!v) return nullptr;
  if (v->type != want) {
    throw key_error(key, "has wrong type " + std::string(gguf::value_type_name(v->type)) + ", expected " +
                             std::string(gguf::value_type_name(want)));
  }
  return v;
}

// u32 key; `fallback` when absent and not required.
int64_t get_u32(const gguf::File& f, const std::string& key, bool required, int64_t fallback) {
  const gguf::Value* v = typed(f, key, ValueType::UINT32);
  if (!v) {
    if (required) throw key_error(key, "missing (required)");
    return fallback;
  }
  return v->as_int();
}

float get_f32(const gguf::File& f, const std::string& key, bool required, float fallback) {
  const gguf::Value* v = typed(f, key, ValueType::FLOAT32);
  if (!v) {
    if (required) throw key_error(key, "missing (required)");
    return fallback;
  }
  return static_cast<float>(v->as_float());
}

// u32 scalar, or an INT32/UINT32 array of exactly n_layer entries (§1.1). Per-layer values must all
// be equal: this engine has one shape for every layer.
int64_t get_u32_or_layers(const gguf::File& f, const std::string& key, int n_layer, bool required,
                          int64_t fallback) {
  const gguf::Value* v = f.find(key);
  if (!v) {
    if (required) throw key_error(key, "missing (required)");
    return fallback;
  }
  if (!v->is_array()) return get_u32(f, key, required, fallback);
  if (v->element_type != ValueType::INT32 && v->element_type != ValueType::UINT32) {
    throw key_error(key, "per-layer array has element type " +
                             std::string(gguf::value_type_name(v->element_type)) + ", expected int32 or uint32");
  }
  const auto& items = v->as_array();
  if (items.size() != static_cast<size_t>(n_layer)) {
    throw key_error(key, "per-layer array has " + std::to_string(items.size()) + " entries, expected block_count " +
                             std::to_string(n_layer));
  }
  const int64_t first = items[0].as_int();
  for (const auto& item : items) {
    if (item.as_int() != first) throw key_error(key, "differs between layers (unsupported)");
  }
  return first;
}

int positive_int(const std::string& key, int64_t v, int64_t max = 1 << 30) {
  if (v <= 0 || v > max) throw key_error(key, "value " + std::to_string(v) + " out of range");
  return static_cast<int>(v);
}

const Arch kArchs[] = {Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3, Arch::Phi3, Arch::Qwen3Moe, Arch::Bert};

Arch parse_architecture(const std::string& name) {
  for (Arch a : kArchs) {
    if (name == arch_name(a)) return a;
  }
  std::string supported;
  for (Arch a : kArchs) supported += std::string(supported.empty() ? "" : ", ") + arch_name(a);
  throw std::runtime_error("unsupported model architecture '" + name + "' (supported: " + supported + ")");
}

bool get_bool(const gguf::File& f, const std::string& key, bool fallback) {
  const gguf::Value* v = typed(f, key, ValueType::BOOL);
  return v ? v->as_bool() : fallback;
}

// gemma3: sliding window, its layer pattern and RoPE base, softcapping (architectures-more.md §1).
void read_gemma3(const gguf::File& file, const std::string& a, HParams& hp) {
  hp.embd_scale = std::sqrt(float(hp.n_embd));
  hp.n_swa = int(get_u32(file, a + "attention.sliding_window", false, 0));
  if (hp.n_swa < 0) throw key_error(a + "attention.sliding_window", "must be >= 0");
  if (const gguf::Value* v = file.find(a + "attention.sliding_window_pattern"); v && v->is_array()) {
    throw key_error(a + "attention.sliding_window_pattern", "per-layer arrays are not supported");
  }
  hp.swa_pattern = positive_int(a + "attention.sliding_window_pattern",
                                get_u32(file, a + "attention.sliding_window_pattern", false, 6));
  hp.rope_freq_base_swa = get_f32(file, a + "rope.freq_base_swa", false, 10000.f);
  if (!(hp.rope_freq_base_swa > 0.f) || !std::isfinite(hp.rope_freq_base_swa)) {
    throw key_error(a + "rope.freq_base_swa", "must be a finite positive number");
  }
  hp.logit_softcap = get_f32(file, a + "final_logit_softcapping", false, 0.f);
  if (!(hp.logit_softcap >= 0.f) || !std::isfinite(hp.logit_softcap)) {
    throw key_error(a + "final_logit_softcapping", "must be a finite non-negative number");
  }
  // the 27B model (62 layers) scales by the embedding's head width instead of key_length
  if (hp.n_layer == 62) hp.attn_scale = 1.0f / std::sqrt(float(hp.n_embd / hp.n_head));
}

// qwen3moe: experts per layer and per token, and an expert's width (architectures-more.md §3.1).
void read_experts(const gguf::File& file, const std::string& a, HParams& hp) {
  hp.n_expert = positive_int(a + "expert_count", get_u32(file, a + "expert_count", true, 0), 4096);
  hp.n_expert_used = positive_int(a + "expert_used_count", get_u32(file, a + "expert_used_count", true, 0), 4096);
  if (hp.n_expert_used > hp.n_expert) {
    throw key_error(a + "expert_used_count", "value " + std::to_string(hp.n_expert_used) + " exceeds expert_count " +
                                                 std::to_string(hp.n_expert));
  }
  hp.n_ff_exp = positive_int(a + "expert_feed_forward_length",
                             get_u32(file, a + "expert_feed_forward_length", false, hp.n_ff / hp.n_expert_used));
}

}  // namespace

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
    case Arch::Gemma3: return "gemma3";
    case Arch::Phi3: return "phi3";
    case Arch::Qwen3Moe: return "qwen3moe";
    case Arch::Bert: return "bert";
  }
  return "?";
}

HParams read_hparams(const gguf::File& file) {
  HParams hp;
  {
    const gguf::Value* v = typed(file, "general.architecture", ValueType::STRING);
    if (!v) throw key_error("general.architecture", "missing (required)");
    hp.arch_name = v->as_string();
  }
  hp.arch = parse_architecture(hp.arch_name);
  const std::string a = hp.arch_name + ".";

  {
    const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
    if (!tokens || !tokens->is_array()) throw key_error("tokenizer.ggml.tokens", "missing (required for n_vocab)");
    hp.n_vocab = positive_int("tokenizer.ggml.tokens", static_cast<int64_t>(tokens->array_size()));
  }
  hp.n_ctx_train = positive_int(a + "context_length", get_u32(file, a + "context_length", true, 0));
  hp.n_embd = positive_int(a + "embedding_length", get_u32(file, a + "embedding_length", true, 0));
  hp.n_layer = positive_int(a + "block_count", get_u32(file, a + "block_count", true, 0), 512);
  hp.n_ff = positive_int(a + "feed_forward_length",
                         get_u32_or_layers(file, a + "feed_forward_length", hp.n_layer, true, 0));
  hp.n_head = positive_int(a + "attention.head_count",
                           get_u32_or_layers(file, a + "attention.head_count", hp.n_layer, true, 0));
  hp.n_kv_head = positive_int(
      a + "attention.head_count_kv",
      get_u32_or_layers(file, a + "attention.head_count_kv", hp.n_layer, false, hp.n_head));
  if (hp.n_head % hp.n_kv_head != 0) {
    throw key_error(a + "attention.head_count_kv", "head_count " + std::to_string(hp.n_head) +
                                                       " is not a multiple of head_count_kv " +
                                                       std::to_string(hp.n_kv_head));
  }

  const int64_t default_hd = hp.n_embd / hp.n_head;
  hp.head_dim = positive_int(a + "attention.key_length", get_u32(file, a + "attention.key_length", false, default_hd));
  const int64_t hd_v = get_u32(file, a + "attention.value_length", false, default_hd);
  if (hd_v != hp.head_dim) {
    throw key_error(a + "attention.value_length",
                    "value_length " + std::to_string(hd_v) + " differs from key_length " +
                        std::to_string(hp.head_dim) + " (unsupported)");
  }
  hp.n_rot = positive_int(a + "rope.dimension_count", get_u32(file, a + "rope.dimension_count", false, hp.head_dim));
  // phi3 rotates a leading part of each head (partial_rotary_factor); the others rotate all of it
  if (hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0 || (hp.arch != Arch::Phi3 && hp.n_rot != hp.head_dim)) {
    throw key_error(a + "rope.dimension_count", "value " + std::to_string(hp.n_rot) +
                                                    (hp.arch == Arch::Phi3 ? " must be even and at most"
                                                                           : " must equal") +
                                                    " the head dimension " + std::to_string(hp.head_dim));
  }
  if (hp.head_dim % 2 != 0) throw key_error(a + "attention.key_length", "head dimension must be even");

  const std::string eps_key = hp.arch == Arch::Bert ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
  hp.rms_eps = get_f32(file, a + eps_key, true, 0.f);
  if (!(hp.rms_eps >= 0.f) || !std::isfinite(hp.rms_eps)) {
    throw key_error(a + eps_key, "must be a finite non-negative number");
  }
  hp.rope_freq_base = get_f32(file, a + "rope.freq_base", false, 10000.f);
  if (!(hp.rope_freq_base > 0.f) || !std::isfinite(hp.rope_freq_base)) {
    throw key_error(a + "rope.freq_base", "must be a finite positive number");
  }

  std::string scaling = "linear";
  if (const gguf::Value* v = typed(file, a + "rope.scaling.type", ValueType::STRING)) scaling = v->as_string();
  if (scaling != "none" && scaling != "linear" && scaling != "longrope") {
    if (scaling == "yarn") throw key_error(a + "rope.scaling.type", "RoPE scaling 'yarn' is not supported");
    throw key_error(a + "rope.scaling.type", "unknown RoPE scaling '" + scaling + "'");
  }
  // LongRoPE's factor tensors are bound for llama and phi3 only (spec §2.1)
  if (scaling == "longrope" && hp.arch != Arch::Llama && hp.arch != Arch::Phi3) {
    throw key_error(a + "rope.scaling.type", "RoPE scaling 'longrope' is not supported for " + hp.arch_name);
  }
  float factor = 0.f;
  if (file.has(a + "rope.scaling.factor")) {
    factor = get_f32(file, a + "rope.scaling.factor", false, 0.f);
  } else if (file.has(a + "rope.scale_linear")) {
    factor = get_f32(file, a + "rope.scale_linear", false, 0.f);
  }
  if (!std::isfinite(factor) || factor < 0.f) throw key_error(a + "rope.scaling.factor", "must be >= 0");
  hp.rope_freq_scale = (scaling == "none" || factor == 0.f) ? 1.f : 1.f / factor;
  hp.rope_mscale = get_f32(file, a + "rope.scaling.attn_factor", false, 1.f);
  if (!(hp.rope_mscale > 0.f) || !std::isfinite(hp.rope_mscale)) {
    throw key_error(a + "rope.scaling.attn_factor", "must be a finite positive number");
  }
  hp.n_ctx_orig = positive_int(a + "rope.scaling.original_context_length",
                               get_u32(file, a + "rope.scaling.original_context_length", false, hp.n_ctx_train));

  hp.pooling_type = int(get_u32(file, a + "pooling_type", false, -1));
  hp.tied_output = file.tensor("output.weight") == nullptr;
  hp.causal = hp.arch != Arch::Bert || get_bool(file, a + "attention.causal", true);
  hp.attn_scale = 1.0f / std::sqrt(float(hp.head_dim));
  if (hp.arch == Arch::Gemma3) read_gemma3(file, a, hp);
  if (hp.arch == Arch::Qwen3Moe) {
    read_experts(file, a, hp);
  } else if (get_u32(file, a + "expert_count", false, 0) > 0) {
    throw key_error(a + "expert_count", "mixture-of-experts layers are not supported for " + hp.arch_name);
  }
  return hp;
}

}  // namespace infer::model
