// The model shapes and file types `infer synth` knows (model/synth.h): public config.json facts of
// each model, and the tiny shapes of shared/reference/models/tiny-*.
#include <stdexcept>

#include "model/synth.h"

namespace infer::model {
namespace {

// The fields beyond the common ones, per architecture.
SynthShape swa(SynthShape s, int window, int pattern, float base) {
  s.n_swa = window;
  s.swa_pattern = pattern;
  s.rope_base_swa = base;
  return s;
}
SynthShape partial_rope(SynthShape s, int n_rot) {
  s.n_rot = n_rot;
  return s;
}
SynthShape longrope(SynthShape s, int n_ctx_orig) {
  s.n_ctx_orig = n_ctx_orig;
  return s;
}
SynthShape experts(SynthShape s, int n, int used, int n_ff_exp) {
  s.n_expert = n;
  s.n_expert_used = used;
  s.n_ff_exp = n_ff_exp;
  return s;
}
SynthShape pooled(SynthShape s, int pooling_type) {
  s.pooling_type = pooling_type;
  return s;
}

const std::vector<SynthShape>& known_shapes() {
  static const std::vector<SynthShape> shapes = {
      {"smollm2-135m", Arch::Llama, 49152, 8192, 576, 30, 9, 3, 64, 1536, 100000.f, 1e-5f, true, "ggml-vocab-smollm.gguf"},
      {"qwen3-0.6b", Arch::Qwen3, 151936, 40960, 1024, 28, 16, 8, 128, 3072, 1e6f, 1e-6f, true, "ggml-vocab-qwen2.gguf"},
      {"llama-3.2-1b", Arch::Llama, 128256, 131072, 2048, 16, 32, 8, 64, 8192, 500000.f, 1e-5f, true, "ggml-vocab-llama-bpe.gguf"},
      {"qwen3-4b", Arch::Qwen3, 151936, 40960, 2560, 36, 32, 8, 128, 9728, 1e6f, 1e-6f, true, "ggml-vocab-qwen2.gguf"},
      // gemma3: 5 local (window 512, base 1e4) to 1 global layer (base 1e6); no vocab file of its own
      swa({"gemma3-270m", Arch::Gemma3, 262144, 32768, 640, 18, 4, 1, 256, 2048, 1e6f, 1e-6f, true, ""}, 512, 6, 10000.f),
      swa({"gemma3-1b", Arch::Gemma3, 262144, 32768, 1152, 26, 4, 1, 256, 6912, 1e6f, 1e-6f, true, ""}, 512, 6, 10000.f),
      // phi-4-mini rotates 3/4 of each head with LongRoPE factors trained at 4096 tokens; its 200k BPE
      // vocab has no file here, so it is synthetic
      longrope(partial_rope({"phi4-mini", Arch::Phi3, 200064, 131072, 3072, 32, 24, 8, 128, 8192, 10000.f, 1e-5f, true, ""}, 96),
               4096),
      // qwen3-30b-a3b: 128 experts of width 768, 8 of them per token
      experts({"qwen3-30b-a3b", Arch::Qwen3Moe, 151936, 40960, 2048, 48, 32, 4, 128, 6144, 1e6f, 1e-6f, false,
               "ggml-vocab-qwen2.gguf"},
              128, 8, 768),
      // bge v1.5 models pool by their [CLS] row
      pooled({"bge-small", Arch::Bert, 30522, 512, 384, 12, 12, 12, 32, 1536, 0.f, 1e-12f, true, "ggml-vocab-bert-bge.gguf"}, 2),
      pooled({"bge-base", Arch::Bert, 30522, 512, 768, 12, 12, 12, 64, 3072, 0.f, 1e-12f, true, "ggml-vocab-bert-bge.gguf"}, 2),
  };
  return shapes;
}

SynthShape tiny_shape(Arch arch) {
  // stories260K's 512-token vocab, except bert's WordPiece one (its f16/q8_0 files are 128 wide)
  switch (arch) {
    case Arch::Llama: return {"tiny", Arch::Llama, 512, 4096, 256, 4, 8, 4, 32, 768, 10000.f, 1e-6f, false, "stories260K.gguf"};
    case Arch::Qwen2: return {"tiny", Arch::Qwen2, 512, 4096, 256, 4, 8, 2, 32, 768, 1e6f, 1e-6f, false, "stories260K.gguf"};
    case Arch::Qwen3: return {"tiny", Arch::Qwen3, 512, 4096, 256, 4, 4, 2, 128, 768, 1e6f, 1e-6f, false, "stories260K.gguf"};
    case Arch::Gemma3:
      return swa({"tiny", Arch::Gemma3, 512, 4096, 256, 6, 4, 2, 64, 512, 1e6f, 1e-6f, true, "stories260K.gguf"}, 8, 6,
                 10000.f);
    case Arch::Phi3:
      return partial_rope({"tiny", Arch::Phi3, 512, 1024, 256, 4, 8, 8, 32, 512, 10000.f, 1e-5f, false, "stories260K.gguf"}, 32);
    case Arch::Qwen3Moe:
      return experts({"tiny", Arch::Qwen3Moe, 512, 4096, 256, 2, 4, 2, 64, 512, 1e6f, 1e-6f, false, "stories260K.gguf"},
                     8, 2, 256);
    case Arch::Bert:
      return pooled({"tiny", Arch::Bert, 30522, 512, 128, 4, 4, 4, 32, 512, 0.f, 1e-12f, true, "ggml-vocab-bert-bge.gguf"}, 1);
  }
  throw std::invalid_argument("no tiny shape for this architecture");
}

// llama, qwen2 and qwen3 differ only in a few tensors, so any of their shapes fits the others.
bool shares_shapes(Arch a) { return a == Arch::Llama || a == Arch::Qwen2 || a == Arch::Qwen3; }

const SynthShape& find_shape(std::string_view like) {
  for (const SynthShape& s : known_shapes())
    if (s.name == like) return s;
  std::string known;
  for (auto& n : synth_shape_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model shape '" + std::string(like) + "' (known: " + known + ")");
}

}  // namespace

std::vector<std::string> synth_shape_names() {
  std::vector<std::string> names = {"tiny"};
  for (const SynthShape& s : known_shapes()) names.push_back(s.name);
  return names;
}

Arch synth_natural_arch(std::string_view like) { return like == "tiny" ? Arch::Llama : find_shape(like).natural_arch; }

SynthShape synth_shape(std::string_view like, Arch arch) {
  if (like == "tiny") return tiny_shape(arch);
  const SynthShape& s = find_shape(like);
  if (s.natural_arch != arch && !(shares_shapes(arch) && shares_shapes(s.natural_arch)))
    throw std::invalid_argument("shape " + s.name + " is a " + arch_name(s.natural_arch) +
                                " model; it cannot be written as " + arch_name(arch));
  return s;
}

SynthType parse_synth_type(std::string_view n) {
  if (n == "f32") return SynthType::F32;
  if (n == "f16") return SynthType::F16;
  if (n == "bf16") return SynthType::BF16;
  if (n == "q8_0") return SynthType::Q8_0;
  if (n == "q4_0") return SynthType::Q4_0;
  if (n == "q5_0") return SynthType::Q5_0;
  if (n == "q5_1") return SynthType::Q5_1;
  if (n == "q4_k_m") return SynthType::Q4_K_M;
  if (n == "q5_k_m") return SynthType::Q5_K_M;
  if (n == "q6_k") return SynthType::Q6_K;
  throw std::invalid_argument("unknown type '" + std::string(n) +
                              "' (known: f32, f16, bf16, q8_0, q4_0, q5_0, q5_1, q4_k_m, q5_k_m, q6_k)");
}

uint32_t synth_file_type(SynthType t) {
  switch (t) {
    case SynthType::F32: return 0;
    case SynthType::F16: return 1;
    case SynthType::BF16: return 32;
    case SynthType::Q8_0: return 7;
    case SynthType::Q4_0: return 2;
    case SynthType::Q5_0: return 8;
    case SynthType::Q5_1: return 9;
    case SynthType::Q4_K_M: return 15;
    case SynthType::Q5_K_M: return 17;
    case SynthType::Q6_K: return 18;
  }
  return 0;
}

Arch parse_arch(std::string_view n) {
  std::string known;
  for (Arch a : {Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3, Arch::Phi3, Arch::Qwen3Moe, Arch::Bert}) {
    if (n == arch_name(a)) return a;
    known += (known.empty() ? "" : ", ") + std::string(arch_name(a));
  }
  throw std::invalid_argument("unknown architecture '" + std::string(n) + "' (known: " + known + ")");
}

}  // namespace infer::model
