#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "kernels/quant.h"
#include "kernels/thread_pool.h"

namespace infer::model {

using gguf::TensorType;

namespace {

// What a tensor is, which decides its initial distribution.
enum class Kind { Embedding, Matrix, Norm, Bias };

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

std::vector<std::string> synth_shape_names() {
  return {"tiny", "smollm2-135m", "qwen3-0.6b", "llama-3.2-1b", "qwen3-4b"};
}

SynthShape synth_shape(std::string_view like, Arch arch) {
  if (like == "tiny") {
    // The shapes of shared/reference/models/tiny-* (stories260K's 512-token vocab).
    switch (arch) {
      case Arch::Llama: return {"tiny", Arch::Llama, 512, 4096, 256, 4, 8, 4, 32, 768, 10000.f, 1e-6f, false, "stories260K.gguf"};
      case Arch::Qwen2: return {"tiny", Arch::Qwen2, 512, 4096, 256, 4, 8, 2, 32, 768, 1e6f, 1e-6f, false, "stories260K.gguf"};
      case Arch::Qwen3: return {"tiny", Arch::Qwen3, 512, 4096, 256, 4, 4, 2, 128, 768, 1e6f, 1e-6f, false, "stories260K.gguf"};
    }
  }
  if (like == "smollm2-135m")
    return {"smollm2-135m", Arch::Llama, 49152, 8192, 576, 30, 9, 3, 64, 1536, 100000.f, 1e-5f, true, "ggml-vocab-smollm.gguf"};
  if (like == "qwen3-0.6b")
    return {"qwen3-0.6b", Arch::Qwen3, 151936, 40960, 1024, 28, 16, 8, 128, 3072, 1e6f, 1e-6f, true, "ggml-vocab-qwen2.gguf"};
  if (like == "llama-3.2-1b")
    return {"llama-3.2-1b", Arch::Llama, 128256, 131072, 2048, 16, 32, 8, 64, 8192, 500000.f, 1e-5f, true, "ggml-vocab-llama-bpe.gguf"};
  if (like == "qwen3-4b")
    return {"qwen3-4b", Arch::Qwen3, 151936, 40960, 2560, 36, 32, 8, 128, 9728, 1e6f, 1e-6f, true, "ggml-vocab-qwen2.gguf"};
  std::string known;
  for (auto& n : synth_shape_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model shape '" + std::string(like) + "' (known: " + known + ")");
}

SynthType parse_synth_type(std::string_view n) {
  if (n == "f32") return SynthType::F32;
  if (n == "f16") return SynthType::F16;
  if (n == "bf16") return SynthType::BF16;
  if (n == "q8_0") return SynthType::Q8_0;
  if (n == "q4_0") return SynthType::Q4_0;
  if (n == "q4_k_m") return SynthType::Q4_K_M;
  if (n == "q5_k_m") return SynthType::Q5_K_M;
  if (n == "q6_k") return SynthType::Q6_K;
  throw std::invalid_argument("unknown type '" + std::string(n) +
                              "' (known: f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k)");
}

uint32_t synth_file_type(SynthType t) {
  switch (t) {
    case SynthType::F32: return 0;
    case SynthType::F16: return 1;
    case SynthType::BF16: return 32;
    case SynthType::Q8_0: return 7;
    case SynthType::Q4_0: return 2;
    case SynthType::Q4_K_M: return 15;
    case SynthType::Q5_K_M: return 17;
    case SynthType::Q6_K: return 18;
  }
  return 0;
}

Arch parse_arch(std::string_view n) {
  if (n == "llama") return Arch::Llama;
  if (n == "qwen2") return Arch::Qwen2;
  if (n == "qwen3") return Arch::Qwen3;
  throw std::invalid_argument("unknown architecture '" + std::string(n) + "' (known: llama, qwen2, qwen3)");
}

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

TensorType mixture_type(SynthType t, std::string_view name, int64_t ne0, int n_layer, bool tied) {
  const TensorType base = plain_type(t);
  if (!is_quantized(t)) return base;  // float files: every matrix in the file's type
  const bool is_output = name == "output.weight" || (tied && name == "token_embd.weight");
  TensorType want = base;
  if (is_output) {
    // The LM head gets Q6_K in every quantised mixture except Q8_0 (which is already finer).
    if (t != SynthType::Q8_0) want = ne0 % 256 == 0 ? TensorType::Q6_K : TensorType::Q8_0;
  } else if (t == SynthType::Q4_K_M || t == SynthType::Q5_K_M) {
    const int layer = layer_of(name);
    // Dense models: the attn_v and ffn_down counters both equal the layer index (§9.2).
    if ((ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight")) && use_more_bits(layer, n_layer))
      want = TensorType::Q6_K;
  }
  return with_fallback(want, ne0);
}

SynthSummary write_synth(const SynthOptions& o, const std::string& path) {
  SynthSummary sum;
  SynthShape sh = synth_shape(o.like, o.arch);
  const char* A = arch_name(o.arch);
  const std::string a = A;
  if (o.arch == Arch::Qwen2 && sh.n_head * sh.head_dim != sh.n_embd)
    throw std::invalid_argument("qwen2 needs n_head x head_dim == n_embd; shape " + sh.name + " has " +
                                std::to_string(sh.n_head) + " x " + std::to_string(sh.head_dim) + " != " +
                                std::to_string(sh.n_embd));
  if (o.threads < 1) throw std::invalid_argument("threads must be >= 1");

  // Tokenizer source.
  std::unique_ptr<gguf::File> vocab;
  std::string vocab_path = o.vocab_path;
  if (vocab_path.empty())
    for (const auto& dir : o.vocab_dirs) {
      auto p = std::filesystem::path(dir) / sh.vocab_file;
      if (std::filesystem::is_regular_file(p)) {
        vocab_path = p.string();
        break;
      }
    }
  if (!vocab_path.empty()) {
    vocab = gguf::File::open(vocab_path);
    const auto* tokens = vocab->find("tokenizer.ggml.tokens");
    if (!tokens || !tokens->is_array()) throw std::invalid_argument(vocab_path + ": no tokenizer.ggml.tokens");
    sh.n_vocab = int(tokens->array_size());  // the vocab decides the embedding's row count
    sum.vocab_source = vocab_path;
  } else {
    sum.vocab_source = "synthetic";
  }

  gguf::Writer w;
  w.add_string("general.architecture", a);
  w.add_string("general.name", "synthetic-" + a + "-" + sh.name);
  w.add_uint32(a + ".context_length", uint32_t(sh.n_ctx));
  w.add_uint32(a + ".embedding_length", uint32_t(sh.n_embd));
  w.add_uint32(a + ".block_count", uint32_t(sh.n_layer));
  w.add_uint32(a + ".feed_forward_length", uint32_t(sh.n_ff));
  w.add_uint32(a + ".attention.head_count", uint32_t(sh.n_head));
  w.add_uint32(a + ".attention.head_count_kv", uint32_t(sh.n_kv_head));
  w.add_float32(a + ".rope.freq_base", sh.rope_base);
  w.add_float32(a + ".attention.layer_norm_rms_epsilon", sh.rms_eps);
  if (o.arch == Arch::Qwen3 || sh.head_dim * sh.n_head != sh.n_embd) {
    w.add_uint32(a + ".attention.key_length", uint32_t(sh.head_dim));
    w.add_uint32(a + ".attention.value_length", uint32_t(sh.head_dim));
  }
  if (o.arch == Arch::Llama) {
    w.add_uint32(a + ".rope.dimension_count", uint32_t(sh.head_dim));
    w.add_uint32(a + ".vocab_size", uint32_t(sh.n_vocab));
  }
  if (vocab) {
    for (const auto& [key, value] : vocab->metadata())
      if (key.rfind("tokenizer.", 0) == 0) w.add_kv(key, value);
  } else {
    add_synthetic_vocab(w, sh.n_vocab);
  }
  w.add_uint32("general.quantization_version", 2);
  w.add_uint32("general.file_type", synth_file_type(o.type));

  // Tensor plan. F32 files are in the converter's order; every other type is what llama-quantize
  // writes: global tensors by name, then each layer's tensors by name (§9.2).
  const bool sorted = o.type != SynthType::F32;
  std::vector<TensorPlan> plan;
  const int64_t E = sh.n_embd, V = sh.n_vocab, F = sh.n_ff, HD = sh.head_dim;
  const int64_t Q = int64_t(sh.n_head) * HD, KV = int64_t(sh.n_kv_head) * HD;
  auto matrix = [&](std::string name, int64_t in, int64_t out, Kind kind = Kind::Matrix) {
    TensorType t = mixture_type(o.type, name, in, sh.n_layer, sh.tied);
    plan.push_back({std::move(name), {in, out}, t, kind});
  };
  auto vec = [&](std::string name, int64_t n, Kind kind) { plan.push_back({std::move(name), {n}, TensorType::F32, kind}); };
  auto by_name = [](auto& x, auto& y) { return x.name < y.name; };
  matrix("token_embd.weight", E, V, Kind::Embedding);
  vec("output_norm.weight", E, Kind::Norm);
  if (!sh.tied) matrix("output.weight", E, V);
  if (sorted) std::sort(plan.begin(), plan.end(), by_name);
  for (int l = 0; l < sh.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const size_t first = plan.size();
    const bool qwen2 = o.arch == Arch::Qwen2;
    vec(p + "attn_norm.weight", E, Kind::Norm);
    matrix(p + "attn_q.weight", E, Q);
    if (qwen2) vec(p + "attn_q.bias", Q, Kind::Bias);
    matrix(p + "attn_k.weight", E, KV);
    if (qwen2) vec(p + "attn_k.bias", KV, Kind::Bias);
    matrix(p + "attn_v.weight", E, KV);
    if (qwen2) vec(p + "attn_v.bias", KV, Kind::Bias);
    if (o.arch == Arch::Qwen3) {
      vec(p + "attn_q_norm.weight", HD, Kind::Norm);
      vec(p + "attn_k_norm.weight", HD, Kind::Norm);
    }
    matrix(p + "attn_output.weight", Q, E);
    vec(p + "ffn_norm.weight", E, Kind::Norm);
    matrix(p + "ffn_gate.weight", E, F);
    matrix(p + "ffn_up.weight", E, F);
    matrix(p + "ffn_down.weight", F, E);
    if (sorted) std::sort(plan.begin() + first, plan.end(), by_name);
  }

  uint64_t total = 0;
  for (const auto& t : plan) {
    // Fail before writing anything when a fallback type (§9.5) is one the kernels cannot encode.
    if (t.type != TensorType::F32 && !kernels::is_supported_weight_type(t.type))
      throw std::invalid_argument("tensor " + t.name + " (rows of " + std::to_string(t.ne[0]) + ") gets type " +
                                  std::string(gguf::type_name(t.type)) + " under the " + sh.name +
                                  " mixture rules, which this project cannot quantise; pick another --type");
    total += gguf::Writer::tensor_bytes(t.type, t.ne);
  }
  sum.shape = sh;
  sum.tensor_bytes = total;
  sum.n_tensors = plan.size();

  auto pool = std::make_shared<kernels::ThreadPool>(o.threads);
  auto done = std::make_shared<uint64_t>(0);
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const TensorPlan& t = plan[ti];
    const int64_t n_in = t.ne[0];
    const int64_t n_rows = t.ne.size() > 1 ? t.ne[1] : 1;
    sum.n_params += uint64_t(n_in * n_rows);
    float mean = 0.f, sigma = 1.f;
    switch (t.kind) {
      case Kind::Embedding: sigma = 1.f; break;
      case Kind::Matrix: sigma = 1.f / std::sqrt(float(n_in)); break;
      case Kind::Norm: mean = 1.f; sigma = 0.05f; break;
      case Kind::Bias: sigma = 0.05f; break;
    }
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
            encode_row(t.type, row, slab.data() + size_t(r) * row_bytes, n_in);
          }
        });
        sink.write(slab.data(), size_t(nr) * row_bytes);
      }
      *done += row_bytes * uint64_t(n_rows);
      if (o.progress) o.progress(*done, total, t.name);
    });
  }
  w.write(path);
  return sum;
}

}  // namespace infer::model
