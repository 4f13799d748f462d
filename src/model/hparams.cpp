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

}  // namespace

HParams read_hparams(const gguf::File& file) {
  HParams hp;
  {
    const gguf::Value* v = typed(file, "general.architecture", ValueType::STRING);
    if (!v) throw key_error("general.architecture", "missing (required)");
    hp.arch_name = v->as_string();
  }
  if (hp.arch_name == "llama") {
    hp.arch = Arch::Llama;
  } else if (hp.arch_name == "qwen2") {
    hp.arch = Arch::Qwen2;
  } else if (hp.arch_name == "qwen3") {
    hp.arch = Arch::Qwen3;
  } else {
    throw std::runtime_error("unsupported model architecture '" + hp.arch_name +
                             "' (supported: llama, qwen2, qwen3)");
  }
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
  if (hp.n_rot != hp.head_dim) {
    throw key_error(a + "rope.dimension_count", "value " + std::to_string(hp.n_rot) +
                                                    " must equal the head dimension " + std::to_string(hp.head_dim));
  }
  if (hp.head_dim % 2 != 0) throw key_error(a + "attention.key_length", "head dimension must be even");

  hp.rms_eps = get_f32(file, a + "attention.layer_norm_rms_epsilon", true, 0.f);
  if (!(hp.rms_eps >= 0.f) || !std::isfinite(hp.rms_eps)) {
    throw key_error(a + "attention.layer_norm_rms_epsilon", "must be a finite non-negative number");
  }
  hp.rope_freq_base = get_f32(file, a + "rope.freq_base", false, 10000.f);
  if (!(hp.rope_freq_base > 0.f) || !std::isfinite(hp.rope_freq_base)) {
    throw key_error(a + "rope.freq_base", "must be a finite positive number");
  }

  std::string scaling = "linear";
  if (const gguf::Value* v = typed(file, a + "rope.scaling.type", ValueType::STRING)) scaling = v->as_string();
  if (scaling != "none" && scaling != "linear") {
    if (scaling == "yarn" || scaling == "longrope") {
      throw key_error(a + "rope.scaling.type", "RoPE scaling '" + scaling + "' is not supported");
    }
    throw key_error(a + "rope.scaling.type", "unknown RoPE scaling '" + scaling + "'");
  }
  float factor = 0.f;
  if (file.has(a + "rope.scaling.factor")) {
    factor = get_f32(file, a + "rope.scaling.factor", false, 0.f);
  } else if (file.has(a + "rope.scale_linear")) {
    factor = get_f32(file, a + "rope.scale_linear", false, 0.f);
  }
  if (!std::isfinite(factor) || factor < 0.f) throw key_error(a + "rope.scaling.factor", "must be >= 0");
  hp.rope_freq_scale = (scaling == "none" || factor == 0.f) ? 1.f : 1.f / factor;
  if (const gguf::Value* v = typed(file, a + "rope.scaling.attn_factor", ValueType::FLOAT32)) {
    if (v->as_float() != 1.0) throw key_error(a + "rope.scaling.attn_factor", "values other than 1 are not supported");
  }

  hp.pooling_type = int(get_u32(file, a + "pooling_type", false, -1));
  hp.rope_neox = hp.arch != Arch::Llama;
  hp.tied_output = file.tensor("output.weight") == nullptr;
  if (get_u32(file, a + "expert_count", false, 0) > 0) {
    throw key_error(a + "expert_count", "mixture-of-experts models are not supported");
  }
  return hp;
}

}  // namespace infer::model
