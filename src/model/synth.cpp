#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "kernels/quant/quant.h"
#include "kernels/runtime/thread_pool.h"
#include "model/layer_recipe.h"

namespace infer::model {

using gguf::TensorType;

namespace {

// What a tensor is, which decides its initial distribution.
enum class Kind { Embedding, Matrix, Norm, Bias, ShortFactors, LongFactors };

struct TensorPlan {
  std::string name;
  std::vector<int64_t> ne;
  TensorType type;
  Kind kind;
};

// splitmix64: tiny, fast and good enough to seed and to draw weights.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t hash_name(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Fills one row with N(mean, sigma) values from a stream that depends only on (row_seed).
void normal_row(uint64_t row_seed, float mean, float sigma, float* out, int64_t n) {
  uint64_t state = row_seed;
  auto uniform = [&] {  // (0, 1]
    state += 0x9E3779B97F4A7C15ull;
    return (double((mix64(state) >> 11)) + 1.0) * 0x1.0p-53;
  };
  for (int64_t i = 0; i < n; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double t = 2.0 * M_PI * uniform();
    out[i] = mean + sigma * float(r * std::cos(t));
    if (i + 1 < n) out[i + 1] = mean + sigma * float(r * std::sin(t));
  }
}

void encode_row(TensorType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case TensorType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case TensorType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = kernels::f32_to_f16(src[i]);
      return;
    }
    case TensorType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = kernels::f32_to_bf16(src[i]);
      return;
    }
    default: kernels::quantize_row(t, src, dst, n);
  }
}

TensorType plain_type(SynthType t) {
  switch (t) {
    case SynthType::F32: return TensorType::F32;
    case SynthType::F16: return TensorType::F16;
    case SynthType::BF16: return TensorType::BF16;
    case SynthType::Q8_0: return TensorType::Q8_0;
    case SynthType::Q4_0: return TensorType::Q4_0;
    case SynthType::Q5_0: return TensorType::Q5_0;
    case SynthType::Q5_1: return TensorType::Q5_1;
    case SynthType::Q4_K_M: return TensorType::Q4_K;
    case SynthType::Q5_K_M: return TensorType::Q5_K;
    case SynthType::Q6_K: return TensorType::Q6_K;
  }
  return TensorType::F32;
}

bool is_quantized(SynthType t) { return t != SynthType::F32 && t != SynthType::F16 && t != SynthType::BF16; }

// §9.5: a type whose block does not divide the row falls back to a smaller-block type, then F16.
TensorType with_fallback(TensorType t, int64_t ne0) {
  auto block = [](TensorType x) { return gguf::type_traits(uint32_t(x))->block_elements; };
  if (ne0 % block(t) == 0) return t;
  TensorType f = t;
  switch (t) {
    case TensorType::Q4_K: f = TensorType::Q5_0; break;
    case TensorType::Q5_K: f = TensorType::Q5_1; break;
    case TensorType::Q6_K: f = TensorType::Q8_0; break;
    default: break;
  }
  return ne0 % block(f) == 0 ? f : TensorType::F16;
}

// Layer index of "blk.N.…", -1 for global tensors.
int layer_of(std::string_view name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(std::string(name.substr(4)).c_str());
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A byte-level BPE vocab of exactly n tokens: the 256 byte symbols, then merged strings built from
// earlier tokens plus one lowercase letter (each merge's parts exist before it), then <|endoftext|>.
void add_synthetic_vocab(gguf::Writer& w, int n_vocab) {
  if (n_vocab < 258) throw std::invalid_argument("synthetic vocab needs at least 258 tokens");
  std::vector<std::string> tokens;
  std::vector<std::string> merges;
  tokens.reserve(n_vocab);
  // GPT-2's byte → symbol table: printable bytes stand for themselves, the rest map to U+0100...
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + extra++);
    std::string s;
    if (cp < 0x80) {
      s.push_back(char(cp));
    } else {
      s.push_back(char(0xC0 | (cp >> 6)));
      s.push_back(char(0x80 | (cp & 0x3F)));
    }
    tokens.push_back(s);
  }
  for (size_t base = 0; int(tokens.size()) < n_vocab - 1; ++base)
    for (char c = 'a'; c <= 'z' && int(tokens.size()) < n_vocab - 1; ++c) {
      merges.push_back(tokens[base] + " " + std::string(1, c));
      tokens.push_back(tokens[base] + c);
    }
  tokens.push_back("<|endoftext|>");
  std::vector<int32_t> types(n_vocab, 1);
  types.back() = 3;  // control
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_array("tokenizer.ggml.tokens", tokens);
  w.add_array("tokenizer.ggml.token_type", types);
  w.add_array("tokenizer.ggml.merges", merges);
  w.add_uint32("tokenizer.ggml.bos_token_id", uint32_t(n_vocab - 1));
  w.add_uint32("tokenizer.ggml.eos_token_id", uint32_t(n_vocab - 1));
  w.add_bool("tokenizer.ggml.add_bos_token", false);
}

}  // namespace

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

TensorType mixture_type(SynthType t, std::string_view name, int64_t ne0, int n_layer, bool tied, int n_expert) {
  const TensorType base = plain_type(t);
  if (!is_quantized(t)) return base;  // float files: every matrix in the file's type
  const bool is_output = name == "output.weight" || (tied && name == "token_embd.weight");
  TensorType want = base;
  if (is_output) {
    // The LM head gets Q6_K in every quantised mixture except Q8_0 (which is already finer).
    if (t != SynthType::Q8_0) want = ne0 % 256 == 0 ? TensorType::Q6_K : TensorType::Q8_0;
  } else if (t == SynthType::Q4_K_M || t == SynthType::Q5_K_M) {
    const int layer = layer_of(name);
    // attn_v's rule covers the fused attn_qkv, ffn_down's the expert stack; the counters of both
    // equal the layer index (§9.2). Mixtral-like 8-expert models get finer attention (§9.3-9.4).
    const bool v = ends_with(name, ".attn_v.weight") || ends_with(name, ".attn_qkv.weight");
    const bool down = ends_with(name, ".ffn_down.weight") || ends_with(name, ".ffn_down_exps.weight");
    if ((v || down) && use_more_bits(layer, n_layer)) want = TensorType::Q6_K;
    if (n_expert == 8 && (v || ends_with(name, ".attn_k.weight"))) want = TensorType::Q8_0;
    if (n_expert == 8 && t == SynthType::Q4_K_M && ends_with(name, ".attn_output.weight")) want = TensorType::Q5_K;
  }
  return with_fallback(want, ne0);
}

namespace {

// The tokenizer's source: `vocab_path`, else the shape's vocab file in the first dir that has it, else
// none (synthetic). The vocab file decides the embedding's row count.
std::unique_ptr<gguf::File> open_vocab(const SynthOptions& o, SynthShape& sh, SynthSummary& sum) {
  std::string path = o.vocab_path;
  if (path.empty() && !sh.vocab_file.empty())
    for (const auto& dir : o.vocab_dirs) {
      auto p = std::filesystem::path(dir) / sh.vocab_file;
      if (std::filesystem::is_regular_file(p)) {
        path = p.string();
        break;
      }
    }
  sum.vocab_source = path.empty() ? "synthetic" : path;
  if (path.empty()) return nullptr;
  auto vocab = gguf::File::open(path);
  const auto* tokens = vocab->find("tokenizer.ggml.tokens");
  if (!tokens || !tokens->is_array()) throw std::invalid_argument(path + ": no tokenizer.ggml.tokens");
  sh.n_vocab = int(tokens->array_size());
  return vocab;
}

// <arch>.* hyper-parameters with the key set llama.cpp's converter writes for the architecture.
void add_hparams(gguf::Writer& w, Arch arch, const SynthShape& sh) {
  const std::string a = std::string(arch_name(arch)) + ".";
  w.add_uint32(a + "context_length", uint32_t(sh.n_ctx));
  w.add_uint32(a + "embedding_length", uint32_t(sh.n_embd));
  w.add_uint32(a + "block_count", uint32_t(sh.n_layer));
  w.add_uint32(a + "feed_forward_length", uint32_t(sh.n_ff));
  w.add_uint32(a + "attention.head_count", uint32_t(sh.n_head));
  if (arch == Arch::Bert) {  // no RoPE, LayerNorm, every token sees the whole sequence
    w.add_float32(a + "attention.layer_norm_epsilon", sh.rms_eps);
    w.add_bool(a + "attention.causal", false);
    if (sh.pooling_type >= 0) w.add_uint32(a + "pooling_type", uint32_t(sh.pooling_type));
    return;
  }
  w.add_uint32(a + "attention.head_count_kv", uint32_t(sh.n_kv_head));
  w.add_float32(a + "rope.freq_base", sh.rope_base);
  w.add_float32(a + "attention.layer_norm_rms_epsilon", sh.rms_eps);
  const bool own_head_dim = arch == Arch::Qwen3 || arch == Arch::Qwen3Moe || arch == Arch::Gemma3;
  if (own_head_dim || sh.head_dim * sh.n_head != sh.n_embd) {
    w.add_uint32(a + "attention.key_length", uint32_t(sh.head_dim));
    w.add_uint32(a + "attention.value_length", uint32_t(sh.head_dim));
  }
  if (arch == Arch::Llama) {
    w.add_uint32(a + "rope.dimension_count", uint32_t(sh.head_dim));
    w.add_uint32(a + "vocab_size", uint32_t(sh.n_vocab));
    if (sh.n_ctx_orig > 0) w.add_string(a + "rope.scaling.type", "longrope");
  }
  if (arch == Arch::Phi3) {  // without LongRoPE factors, plain RoPE over the whole context
    w.add_uint32(a + "rope.dimension_count", uint32_t(sh.n_rot > 0 ? sh.n_rot : sh.head_dim));
    if (sh.n_ctx_orig == 0) w.add_uint32(a + "rope.scaling.original_context_length", uint32_t(sh.n_ctx));
  }
  if (sh.n_ctx_orig > 0) {  // the keys phi3's converter writes with its factors
    const double scale = double(sh.n_ctx) / sh.n_ctx_orig;
    w.add_uint32(a + "rope.scaling.original_context_length", uint32_t(sh.n_ctx_orig));
    w.add_float32(a + "rope.scaling.attn_factor", float(std::sqrt(1 + std::log(scale) / std::log(double(sh.n_ctx_orig)))));
  }
  if (arch == Arch::Gemma3 && sh.n_swa > 0) {
    w.add_uint32(a + "attention.sliding_window", uint32_t(sh.n_swa));
    w.add_uint32(a + "attention.sliding_window_pattern", uint32_t(sh.swa_pattern));
    w.add_float32(a + "rope.freq_base_swa", sh.rope_base_swa);
  }
  if (arch == Arch::Qwen3Moe) {
    w.add_uint32(a + "expert_count", uint32_t(sh.n_expert));
    w.add_uint32(a + "expert_used_count", uint32_t(sh.n_expert_used));
    w.add_uint32(a + "expert_feed_forward_length", uint32_t(sh.n_ff_exp));
  }
}

void add_tokenizer(gguf::Writer& w, const gguf::File* vocab, Arch arch, const SynthShape& sh) {
  if (vocab) {
    for (const auto& [key, value] : vocab->metadata())
      if (key.rfind("tokenizer.", 0) == 0) w.add_kv(key, value);
  } else {
    add_synthetic_vocab(w, sh.n_vocab);
  }
  // bert files need a token-type count (llama.cpp refuses 0); we only ever use type 0
  if (arch == Arch::Bert && !(vocab && vocab->find("tokenizer.ggml.token_type_count")))
    w.add_uint32("tokenizer.ggml.token_type_count", 2);
}

// The layer description (layer_recipe.h) of this architecture: which norms,
// post-norms and feed-forward tensors its layers need.
LayerRecipe recipe_of(Arch arch) {
  HParams hp;
  hp.arch = arch;
  hp.n_layer = 1;
  return describe_layers(hp).layers.front();
}

// The tensors and their types, in the order llama.cpp's tools write them: F32 files in the
// converter's order; every other type as llama-quantize writes it: global tensors by name, then each
// layer's tensors by name (§9.2). Which tensors a layer has follows its description; the names and
// fused matrices are the converter's.
class TensorPlanner {
 public:
  TensorPlanner(const SynthOptions& o, const SynthShape& sh)
      : o_(o), sh_(sh), recipe_(recipe_of(o.arch)), sorted_(o.type != SynthType::F32) {}

  std::vector<TensorPlan> plan() {
    globals();
    sort_from(0);
    for (int l = 0; l < sh_.n_layer; ++l) {
      const size_t first = plan_.size();
      const std::string p = "blk." + std::to_string(l) + ".";
      if (recipe_.norm == NormPlacement::PostLayerNorm) {
        post_layernorm_layer(p);
      } else {
        attention(p);
        ffn(p);
      }
      sort_from(first);
    }
    return std::move(plan_);
  }

 private:
  void globals() {
    const int64_t E = sh_.n_embd, V = sh_.n_vocab;
    if (sh_.n_ctx_orig > 0) {  // the converter's extra tensors come first
      const int64_t pairs = (sh_.n_rot > 0 ? sh_.n_rot : sh_.head_dim) / 2;
      vec("rope_factors_long.weight", pairs, Kind::LongFactors);
      vec("rope_factors_short.weight", pairs, Kind::ShortFactors);
    }
    matrix("token_embd.weight", E, V, Kind::Embedding);
    if (recipe_.norm == NormPlacement::PostLayerNorm) {  // llama-quantize never quantises these two (§9.1)
      plan_.push_back({"token_types.weight", {E, 2}, TensorType::F32, Kind::Embedding});
      plan_.push_back({"position_embd.weight", {E, sh_.n_ctx}, TensorType::F32, Kind::Embedding});
      vec("token_embd_norm.weight", E, Kind::Norm);
      vec("token_embd_norm.bias", E, Kind::Bias);
      return;
    }
    vec("output_norm.weight", E, Kind::Norm);
    if (!sh_.tied) matrix("output.weight", E, V);
  }

  void attention(const std::string& p) {
    const int64_t E = sh_.n_embd, HD = sh_.head_dim, Q = sh_.n_head * HD, KV = sh_.n_kv_head * HD;
    const Arch arch = o_.arch;
    vec(p + "attn_norm.weight", E, Kind::Norm);
    if (arch == Arch::Phi3) {
      matrix(p + "attn_qkv.weight", E, Q + 2 * KV);
    } else {
      const bool biases = arch == Arch::Qwen2;
      matrix(p + "attn_q.weight", E, Q);
      if (biases) vec(p + "attn_q.bias", Q, Kind::Bias);
      matrix(p + "attn_k.weight", E, KV);
      if (biases) vec(p + "attn_k.bias", KV, Kind::Bias);
      matrix(p + "attn_v.weight", E, KV);
      if (biases) vec(p + "attn_v.bias", KV, Kind::Bias);
    }
    if (recipe_.qk_norm) {
      vec(p + "attn_q_norm.weight", HD, Kind::Norm);
      vec(p + "attn_k_norm.weight", HD, Kind::Norm);
    }
    matrix(p + "attn_output.weight", Q, E);
    if (recipe_.post_block_norms) vec(p + "post_attention_norm.weight", E, Kind::Norm);
  }

  void ffn(const std::string& p) {
    const int64_t E = sh_.n_embd, F = sh_.n_ff;
    vec(p + "ffn_norm.weight", E, Kind::Norm);
    if (recipe_.ffn == FeedForwardKind::Experts) {
      const int64_t FE = sh_.n_ff_exp, NE = sh_.n_expert;
      plan_.push_back({p + "ffn_gate_inp.weight", {E, NE}, TensorType::F32, Kind::Matrix});  // never quantised
      experts(p + "ffn_gate_exps.weight", E, FE, NE);
      experts(p + "ffn_up_exps.weight", E, FE, NE);
      experts(p + "ffn_down_exps.weight", FE, E, NE);
      return;
    }
    if (o_.arch == Arch::Phi3) {
      matrix(p + "ffn_up.weight", E, 2 * F);  // the gate's rows, then the up rows
    } else {
      matrix(p + "ffn_gate.weight", E, F);
      matrix(p + "ffn_up.weight", E, F);
    }
    matrix(p + "ffn_down.weight", F, E);
    if (recipe_.post_block_norms) vec(p + "post_ffw_norm.weight", E, Kind::Norm);
  }

  // post-LayerNorm layer (bert's): every matrix with its bias, a LayerNorm after attention and after
  // the FFN
  void post_layernorm_layer(const std::string& p) {
    const int64_t E = sh_.n_embd, F = sh_.n_ff, Q = sh_.n_head * sh_.head_dim;
    auto affine = [&](const std::string& name, int64_t in, int64_t out) {
      matrix(p + name + ".weight", in, out);
      vec(p + name + ".bias", out, Kind::Bias);
    };
    auto layernorm = [&](const std::string& name) {
      vec(p + name + ".weight", E, Kind::Norm);
      vec(p + name + ".bias", E, Kind::Bias);
    };
    affine("attn_q", E, Q);
    affine("attn_k", E, Q);
    affine("attn_v", E, Q);
    affine("attn_output", Q, E);
    layernorm("attn_output_norm");
    affine("ffn_up", E, F);
    affine("ffn_down", F, E);
    layernorm("layer_output_norm");
  }

  void matrix(std::string name, int64_t in, int64_t out, Kind kind = Kind::Matrix) {
    const TensorType t = mixture_type(o_.type, name, in, sh_.n_layer, sh_.tied, sh_.n_expert);
    plan_.push_back({std::move(name), {in, out}, t, kind});
  }
  void experts(std::string name, int64_t in, int64_t out, int64_t n) {
    const TensorType t = mixture_type(o_.type, name, in, sh_.n_layer, sh_.tied, sh_.n_expert);
    plan_.push_back({std::move(name), {in, out, n}, t, Kind::Matrix});
  }
  void vec(std::string name, int64_t n, Kind kind) { plan_.push_back({std::move(name), {n}, TensorType::F32, kind}); }
  void sort_from(size_t first) {
    if (sorted_)
      std::sort(plan_.begin() + long(first), plan_.end(), [](auto& x, auto& y) { return x.name < y.name; });
  }

  const SynthOptions& o_;
  const SynthShape& sh_;
  const LayerRecipe recipe_;
  const bool sorted_;
  std::vector<TensorPlan> plan_;
};

// Total bytes of the plan; fails before anything is written when a fallback type (§9.5) is one the
// kernels cannot encode.
uint64_t check_plan(const std::vector<TensorPlan>& plan, const SynthShape& sh) {
  uint64_t total = 0;
  for (const auto& t : plan) {
    if (t.type != TensorType::F32 && !kernels::is_supported_weight_type(t.type))
      throw std::invalid_argument("tensor " + t.name + " (rows of " + std::to_string(t.ne[0]) + ") gets type " +
                                  std::string(gguf::type_name(t.type)) + " under the " + sh.name +
                                  " mixture rules, which this project cannot quantise; pick another --type");
    total += gguf::Writer::tensor_bytes(t.type, t.ne);
  }
  return total;
}

// LongRoPE divisors from N(0, 0.05) noise (synth.h): short near 1, long rising to n_ctx / n_ctx_orig.
void to_factors(Kind kind, double long_ratio, float* row, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double rise = n > 1 ? std::pow(long_ratio, double(i) / double(n - 1)) : 1.0;
    row[i] = kind == Kind::ShortFactors ? 1.f + std::abs(row[i]) : float(rise * (1.0 + row[i]));
  }
}

// Queues each tensor's data: rows drawn and encoded in parallel slabs when the writer asks for them.
void add_tensor_data(gguf::Writer& w, const std::vector<TensorPlan>& plan, const SynthOptions& o, const SynthShape& sh,
                     uint64_t total, SynthSummary& sum) {
  auto pool = std::make_shared<kernels::ThreadPool>(o.threads);
  auto done = std::make_shared<uint64_t>(0);
  for (const TensorPlan& t : plan) {
    const int64_t n_in = t.ne[0];
    int64_t n_rows = 1;  // a 3-D expert stack is its experts' matrices one after another
    for (size_t d = 1; d < t.ne.size(); ++d) n_rows *= t.ne[d];
    sum.n_params += uint64_t(n_in * n_rows);
    float mean = 0.f, sigma = 1.f;
    switch (t.kind) {
      case Kind::Embedding: sigma = 1.f; break;
      case Kind::Matrix: sigma = 1.f / std::sqrt(float(n_in)); break;
      case Kind::Norm: mean = 1.f; sigma = 0.05f; break;
      case Kind::Bias:
      case Kind::ShortFactors:
      case Kind::LongFactors: sigma = 0.05f; break;
    }
    const double long_ratio = double(sh.n_ctx) / std::max(1, sh.n_ctx_orig);
    const uint64_t tensor_seed = mix64(o.seed ^ mix64(hash_name(t.name)));
    const uint64_t row_bytes = gguf::row_bytes(t.type, uint64_t(n_in));
    w.add_tensor(t.name, t.type, t.ne, [=, &o, &t](gguf::TensorSink& sink) {
      // Slabs of rows (~8 MiB) encoded in parallel, then written in order.
      const int64_t slab_rows = std::max<int64_t>(1, int64_t(8 << 20) / int64_t(row_bytes));
      std::vector<uint8_t> slab(size_t(std::min(slab_rows, n_rows)) * row_bytes);
      std::vector<std::vector<float>> scratch(pool->size(), std::vector<float>(n_in));
      for (int64_t r0 = 0; r0 < n_rows; r0 += slab_rows) {
        const int64_t nr = std::min(slab_rows, n_rows - r0);
        pool->run([&](int ti) {
          auto range = kernels::split_range(nr, ti, pool->size());
          float* row = scratch[ti].data();
          for (int64_t r = range.begin; r < range.end; ++r) {
            normal_row(mix64(tensor_seed + uint64_t(r0 + r)), mean, sigma, row, n_in);
            if (t.kind == Kind::ShortFactors || t.kind == Kind::LongFactors) to_factors(t.kind, long_ratio, row, n_in);
            encode_row(t.type, row, slab.data() + size_t(r) * row_bytes, n_in);
          }
        });
        sink.write(slab.data(), size_t(nr) * row_bytes);
      }
      *done += row_bytes * uint64_t(n_rows);
      if (o.progress) o.progress(*done, total, t.name);
    });
  }
}

void check_shape(const SynthOptions& o, const SynthShape& sh) {
  // these write no key_length, so their head width is n_embd / n_head
  const bool q_is_embd = o.arch == Arch::Qwen2 || o.arch == Arch::Phi3 || o.arch == Arch::Bert;
  if (q_is_embd && sh.n_head * sh.head_dim != sh.n_embd)
    throw std::invalid_argument(std::string(arch_name(o.arch)) + " needs n_head x head_dim == n_embd; shape " +
                                sh.name + " has " + std::to_string(sh.n_head) + " x " + std::to_string(sh.head_dim) +
                                " != " + std::to_string(sh.n_embd));
  if (o.threads < 1) throw std::invalid_argument("threads must be >= 1");
  if (sh.n_ctx_orig != 0 && o.arch != Arch::Phi3 && o.arch != Arch::Llama)
    throw std::invalid_argument(std::string("LongRoPE factors are for phi3 and llama, not ") + arch_name(o.arch));
  if (sh.n_ctx_orig < 0 || sh.n_ctx_orig >= sh.n_ctx)
    throw std::invalid_argument("LongRoPE original context " + std::to_string(sh.n_ctx_orig) +
                                " must be above 0 and below the shape's context " + std::to_string(sh.n_ctx));
}

}  // namespace

SynthSummary write_synth(const SynthOptions& o, const std::string& path) {
  SynthSummary sum;
  SynthShape sh = synth_shape(o.like, o.arch);
  if (o.longrope_orig_ctx >= 0) sh.n_ctx_orig = o.longrope_orig_ctx;
  if (o.n_layer > 0) sh.n_layer = o.n_layer;
  check_shape(o, sh);
  const std::unique_ptr<gguf::File> vocab = open_vocab(o, sh, sum);

  const std::string a = arch_name(o.arch);
  gguf::Writer w;
  w.add_string("general.architecture", a);
  // llama.cpp gives files named "phi3" special-token rules that need <|endoftext|> in the vocab
  w.add_string("general.name", "synthetic-" + (o.arch == Arch::Phi3 ? std::string("phi") : a) + "-" + sh.name);
  add_hparams(w, o.arch, sh);
  add_tokenizer(w, vocab.get(), o.arch, sh);
  w.add_uint32("general.quantization_version", 2);
  w.add_uint32("general.file_type", synth_file_type(o.type));

  const std::vector<TensorPlan> plan = TensorPlanner(o, sh).plan();
  const uint64_t total = check_plan(plan, sh);
  sum.shape = sh;
  sum.tensor_bytes = total;
  sum.n_tensors = plan.size();
  add_tensor_data(w, plan, o, sh, total, sum);
  w.write(path);
  return sum;
}

}  // namespace infer::model
