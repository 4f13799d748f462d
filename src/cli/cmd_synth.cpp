// `infer synth`: writes a random-weight GGUF model of a real shape (see model/synth.h).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/command_registry.h"
#include "model/synth.h"

namespace infer::cli {
namespace {

struct SynthArgs {
  std::string arch;
  std::string like = "tiny";
  std::string type = "f32";
  std::string out;
  uint64_t seed = 1;
  int threads = 2;
  std::string vocab;
  int longrope_orig_ctx = -1;
  int layers = 0;
};

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

void run_synth(const SynthArgs& a) {
  model::SynthOptions o;
  o.like = a.like;
  o.type = model::parse_synth_type(a.type);
  // Without --arch the shape's own architecture is used.
  o.arch = a.arch.empty() ? model::synth_natural_arch(a.like) : model::parse_arch(a.arch);
  o.seed = a.seed;
  o.threads = a.threads;
  o.vocab_path = a.vocab;
  o.longrope_orig_ctx = a.longrope_orig_ctx;
  o.n_layer = a.layers;
  // Same variables (and defaults, relative to the working directory) as the tests use.
  o.vocab_dirs = {env_or("INFER_MODELS_DIR", "../shared/models"), env_or("INFER_VECTORS_DIR", "../shared/tokenizer-vectors")};
  int last_pct = -1;
  o.progress = [&](uint64_t done, uint64_t total, const std::string& tensor) {
    if (total < (64u << 20)) return;  // small files: no noise
    int pct = int(done * 100 / total);
    if (pct / 5 != last_pct / 5 || done == total) {
      std::fprintf(stderr, "\rsynth: %3d%% (%llu / %llu MiB) %-32s", pct, (unsigned long long)(done >> 20),
                   (unsigned long long)(total >> 20), tensor.c_str());
      if (done == total) std::fputc('\n', stderr);
      last_pct = pct;
    }
  };
  auto s = model::write_synth(o, a.out);
  std::fprintf(stderr, "synth: wrote %s: %s %s %s, %zu tensors, %.1f M params, %.1f MiB, vocab %d from %s\n",
               a.out.c_str(), model::arch_name(o.arch), s.shape.name.c_str(), a.type.c_str(), s.n_tensors,
               double(s.n_params) / 1e6, double(s.tensor_bytes) / (1 << 20), s.shape.n_vocab, s.vocab_source.c_str());
}

void setup_synth(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  auto* cmd = app.add_subcommand("synth", "Write a random-weight GGUF model of a real shape");
  cmd->add_option("--arch", args->arch,
                  "llama | qwen2 | qwen3 | gemma3 | phi3 | qwen3moe | bert (default: the shape's own)");
  std::string shapes;
  for (const auto& n : model::synth_shape_names()) shapes += (shapes.empty() ? "" : " | ") + n;
  cmd->add_option("--like", args->like, shapes);
  cmd->add_option("--type", args->type, "f32 | f16 | bf16 | q8_0 | q4_0 | q5_0 | q5_1 | q4_k_m | q5_k_m | q6_k");
  cmd->add_option("-o,--output", args->out, "output GGUF file")->required();
  cmd->add_option("--seed", args->seed, "weight seed");
  cmd->add_option("-t,--threads", args->threads, "threads")->check(CLI::Range(1, 1024));
  cmd->add_option("--vocab", args->vocab, "GGUF file to copy tokenizer.* metadata from")->check(CLI::ExistingFile);
  cmd->add_option("--longrope-orig-ctx", args->longrope_orig_ctx,
                  "phi3/llama: write LongRoPE factors trained at this context (0 = none; default: the shape's, "
                  "phi4-mini 4096)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--layers", args->layers, "write only this many layers of the shape (default: all)")
      ->check(CLI::Range(1, 4096));
  cmd->callback([args] { run_synth(*args); });
}

RegisterCommand reg("synth", setup_synth);

}  // namespace
}  // namespace infer::cli
