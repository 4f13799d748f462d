// `infer bench`: prefill (pp) and decode (tg) speed like llama-bench, plus a read-bandwidth probe in
// the same process and the share of it that decode achieves. `--embed N` measures embedding throughput
// instead (bert embedders, or any model): sequences of N tokens per second through the engine.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "cli/device_flags.h"
#include "cli/grammar_flags.h"
#include "cuda/cuda_backend.h"
#include "engine/decode_step.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "gguf/tensor_type.h"
#include "kernels/runtime/bandwidth.h"
#include "kernels/matmul/kernel_plan.h"
#include "kernels/matmul/kernel_report.h"
#include "kernels/runtime/thread_pool.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace infer::cli {
namespace {

struct BenchArgs {
  std::string model;
  int p = 512;
  int n = 128;
  int depth = 0;  // tokens already in the context when pp and tg start
  int threads = 1;
  int reps = 3;
  bool json = false;
  int probe_mib = 1024;
  bool mmap = false;
  int embed = 0;        // tokens per sequence of the embedding benchmark; 0: pp/tg instead
  int embed_seqs = 32;  // sequences per repetition
  std::string grammar_file;  // GBNF: tg also runs constrained, alternating with unconstrained
  std::string json_schema_file;  // the same with a JSON schema's grammar
  DeviceArgs device;
};

struct Stat {
  double mean = 0, stddev = 0;
};

Stat stat_of(const std::vector<double>& v) {
  Stat s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(ss / double(v.size() - 1));
  }
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Bytes of weights one decode step reads: the active weights (a mixture of experts runs only its
// chosen experts), except that an untied embedding table is only gathered (one row per token). The KV
// cache read is left out (small at these lengths).
uint64_t weight_bytes_per_token(const model::Model& m) {
  uint64_t bytes = m.active_weight_bytes();
  const auto* embd = m.file().tensor("token_embd.weight");
  if (embd && !m.hparams().tied_output) bytes -= embd->n_bytes - embd->row_bytes();
  return bytes;
}

// Embedding throughput: each repetition submits embed_seqs sequences of `embed` random tokens at once
// (the engine batches them as the server would) and times them all; mean pooling, as bge models use.
void run_embed_bench(const BenchArgs& a) {
  engine::EngineOptions o;
  o.model_path = a.model;
  o.mmap = a.mmap;
  o.threads = a.threads;
  o.queue_depth = a.embed_seqs;
  o.context = a.embed;
  o.step_tokens = std::max(512, a.embed);
  o.prefix_cache = false;
  o.device = device_options(a.device);
  auto e = engine::Engine::create(o);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any_token(0, e->n_vocab() - 1);
  auto run_once = [&] {
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    std::string error;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.embed_seqs; ++i) {
      engine::Request r;
      r.prompt_ids.resize(size_t(a.embed));
      for (auto& t : r.prompt_ids) t = any_token(rng);
      r.embedding = true;
      r.pooling = engine::Pooling::Mean;
      engine::Callbacks cb;
      cb.on_done = [&](engine::Result&& res) {
        std::lock_guard lock(mu);
        if (res.finish != engine::FinishReason::Stop) error = res.error;
        ++done;
        cv.notify_one();
      };
      auto h = e->submit(std::move(r), std::move(cb));
      if (auto* err = std::get_if<engine::SubmitError>(&h)) throw std::runtime_error("bench --embed: " + err->message);
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done == a.embed_seqs; });
    if (!error.empty()) throw std::runtime_error("bench --embed: " + error);
    return a.embed_seqs / seconds_since(t0);
  };
  std::fprintf(stderr, "bench: %s, %d threads, embedding %d sequences of %d tokens, warm-up\n", a.model.c_str(),
               a.threads, a.embed_seqs, a.embed);
  std::fprintf(stderr, "bench: backend: %s\n", e->backend_description().c_str());
  run_once();
  std::vector<double> seqs;
  for (int r = 0; r < a.reps; ++r) {
    seqs.push_back(run_once());
    std::fprintf(stderr, "bench: embed%d rep %d/%d: %.2f sequences/s\n", a.embed, r + 1, a.reps, seqs.back());
  }
  const Stat s = stat_of(seqs);
  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["threads"] = a.threads;
    j["embed_tokens"] = a.embed;
    j["embed_sequences"] = a.embed_seqs;
    j["repetitions"] = a.reps;
    j["embed_seqs_per_s"] = s.mean;
    j["embed_seqs_per_s_stddev"] = s.stddev;
    j["embed_tokens_per_s"] = s.mean * a.embed;
    j["device"] = model::device_name(o.device.kind);
    j["backend"] = e->backend_description();
    j["cpu"] = kernels::cpu_model();
    std::puts(j.dump().c_str());
    return;
  }
  std::printf("| model | threads | test | sequences/s | tokens/s |\n|---|---|---|---|---|\n");
  std::printf("| %s | %d | embed%d x %d | %.2f ± %.2f | %.1f |\n", a.model.c_str(), a.threads, a.embed, a.embed_seqs,
              s.mean, s.stddev, s.mean * a.embed);
  std::printf("backend: %s\n", e->backend_description().c_str());
  std::printf("cpu: %s\n", kernels::cpu_model().c_str());
}

void run_bench(const BenchArgs& a) {
  if (a.embed > 0) return run_embed_bench(a);
  if (a.p < 0 || a.n < 0 || (a.p == 0 && a.n == 0)) throw std::invalid_argument("-p and -n must be >= 0, and not both 0");
  if (a.reps < 1) throw std::invalid_argument("-r must be >= 1");
  if (a.depth < 0) throw std::invalid_argument("-d must be >= 0");
  const model::DeviceOptions device = device_options(a.device);
  model::LoadOptions lo;
  lo.prefetch = true;
  lo.mmap = a.mmap;
  lo.context = a.depth + std::max(a.p, a.n) + 1;  // the generator's context below
  auto model = model::Model::load(a.model, lo);
  const auto& hp = model->hparams();
  engine::GeneratorOptions go;
  go.threads = a.threads;
  go.context = lo.context;
  go.prefill_chunk = std::max(1, std::min(std::max(a.p, a.depth), 512));
  go.device = device;
  if (hp.n_ctx_train > 0 && go.context > hp.n_ctx_train)
    throw std::invalid_argument("-d/-p/-n exceed the model's context of " + std::to_string(hp.n_ctx_train));
  engine::Generator gen(*model, nullptr, go);

  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any_token(0, hp.n_vocab - 1);
  std::vector<int32_t> prompt(std::max(a.p, 1));
  for (auto& t : prompt) t = any_token(rng);

  // Warm-up: pages of the mapping fault in, caches and the thread pool settle.
  std::fprintf(stderr, "bench: %s, %d threads, warm-up\n", a.model.c_str(), a.threads);
  std::fprintf(stderr, "bench: backend: %s\n", gen.backend().description().c_str());
  gen.forward(prompt.data(), std::min<int>(int(prompt.size()), 16), 0);
  // The prompt holds at least one token (p may be 0), so the decode warm-up cycles through it.
  for (int i = 0; i < std::min(a.n, 4); ++i) gen.forward(&prompt[size_t(i) % prompt.size()], 1, i);
  // The context pp and tg start from: prefilled once, untimed; each repetition then writes its
  // positions depth.. again.
  if (a.depth > 0) {
    std::fprintf(stderr, "bench: prefilling a context of %d tokens\n", a.depth);
    std::vector<int32_t> context(static_cast<size_t>(a.depth));
    for (auto& t : context) t = any_token(rng);
    gen.forward(context.data(), a.depth, 0);
  }

  // --grammar: decode goes through the engine's DecodeStep (sampler at its defaults, seed 1), once
  // unconstrained and once constrained per repetition, alternating; a text the grammar ends starts a
  // new one (a new matcher of the same compiled grammar: its cached masks stay).
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  const std::string constraint_file = a.grammar_file.empty() ? a.json_schema_file : a.grammar_file;
  if (!constraint_file.empty()) {
    const std::string text = read_constraint_flags(a.grammar_file, a.json_schema_file);
    tok = tokenizer::Tokenizer::from_gguf(model->file());
    const auto t0 = std::chrono::steady_clock::now();
    grammar = grammar::compile_grammar(text, *tok);
    std::fprintf(stderr, "bench: grammar compiled in %.1f ms (vocabulary trie: %zu nodes)\n", seconds_since(t0) * 1e3,
                 grammar->vocab().n_nodes());
  }
  double step_s = 0, plain_step_s = 0;  // time in sample() and take(): constrained runs, unconstrained ones
  int texts_ended = 0;
  std::string sample_text;
  auto decode_steps = [&](const std::shared_ptr<const grammar::CompiledGrammar>& g) {
    engine::SamplingParams sp;
    sp.seed = 1;
    std::optional<engine::DecodeStep> step;
    std::vector<int32_t> history;
    auto fresh = [&] {
      step.emplace(sp, hp.n_vocab, tok.get(), std::vector<std::string>{}, true, nullptr, g);
      history.clear();
    };
    fresh();
    int32_t id = prompt[0];
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.n; ++i) {
      const float* logits = gen.forward(&id, 1, a.depth + i);
      const auto ts = std::chrono::steady_clock::now();
      id = step->sample(logits, history);
      history.push_back(id);
      const bool ended = step->take(id) != engine::DecodeStep::Outcome::Continue;
      (g ? step_s : plain_step_s) += seconds_since(ts);
      if (ended) {
        if (g) ++texts_ended;
        if (g && sample_text.empty()) sample_text = step->text();
        fresh();
      }
    }
    if (g && sample_text.empty()) sample_text = step->text();
    return a.n / seconds_since(t0);
  };

  std::vector<double> pp, tg, tg_grammar;
  for (int r = 0; r < a.reps; ++r) {
    if (a.p > 0) {
      auto t0 = std::chrono::steady_clock::now();
      gen.forward(prompt.data(), a.p, a.depth);
      pp.push_back(a.p / seconds_since(t0));
      std::fprintf(stderr, "bench: pp%d rep %d/%d: %.2f tok/s\n", a.p, r + 1, a.reps, pp.back());
    }
    if (a.n > 0 && grammar) {
      tg.push_back(decode_steps(nullptr));
      tg_grammar.push_back(decode_steps(grammar));
      std::fprintf(stderr, "bench: tg%d rep %d/%d: %.2f tok/s, with the grammar %.2f tok/s\n", a.n, r + 1, a.reps,
                   tg.back(), tg_grammar.back());
    } else if (a.n > 0) {
      int32_t tok = prompt[0];
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < a.n; ++i) {
        const float* logits = gen.forward(&tok, 1, a.depth + i);
        tok = int32_t(std::max_element(logits, logits + hp.n_vocab) - logits);  // greedy, as decode does
      }
      tg.push_back(a.n / seconds_since(t0));
      std::fprintf(stderr, "bench: tg%d rep %d/%d: %.2f tok/s\n", a.n, r + 1, a.reps, tg.back());
    }
  }

  // The ceiling decode is measured against: the CPU's read bandwidth, or the GPU's HBM (a device copy).
  const bool cuda = device.kind == model::DeviceKind::Cuda;
  double bw_gbs = 0, h2d_gbs = 0;
  if (cuda) {
    std::fprintf(stderr, "bench: GPU bandwidth probe (device and host-to-device copies of %d MiB)\n", a.probe_mib);
    const cuda::Bandwidth gpu_bw = cuda::measure_bandwidth(uint64_t(a.probe_mib) << 20, 5);
    bw_gbs = gpu_bw.device_gbs;
    h2d_gbs = gpu_bw.host_to_device_gbs;
  } else {
    std::fprintf(stderr, "bench: bandwidth probe (%d MiB, %d threads)\n", a.probe_mib, a.threads);
    kernels::ThreadPool probe_pool(a.threads);
    bw_gbs = kernels::measure_read_bandwidth_gbs(probe_pool, size_t(a.probe_mib) << 20, 3);
  }

  const Stat pps = stat_of(pp), tgs = stat_of(tg), tggs = stat_of(tg_grammar);
  const double grammar_ratio = tgs.mean > 0 ? tggs.mean / tgs.mean : 0;
  const double grammar_ms_per_token = tg_grammar.empty() ? 0 : step_s * 1e3 / (double(a.n) * double(tg_grammar.size()));
  const double plain_ms_per_token = tg_grammar.empty() ? 0 : plain_step_s * 1e3 / (double(a.n) * double(tg_grammar.size()));
  const uint64_t per_token = weight_bytes_per_token(*model);
  const double tg_gbs = double(per_token) * tgs.mean / 1e9;
  const double share = bw_gbs > 0 ? tg_gbs / bw_gbs : 0;
  uint64_t model_bytes = 0;
  for (const auto& t : model->file().tensors()) model_bytes += t.n_bytes;

  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["threads"] = a.threads;
    j["n_prompt"] = a.p;
    j["n_gen"] = a.n;
    j["depth"] = a.depth;
    j["repetitions"] = a.reps;
    j["pp_tps"] = pps.mean;
    j["pp_tps_stddev"] = pps.stddev;
    j["tg_tps"] = tgs.mean;
    j["tg_tps_stddev"] = tgs.stddev;
    j["bandwidth_gbs"] = bw_gbs;
    if (cuda) {
      j["hbm_bandwidth_gbs"] = bw_gbs;
      j["h2d_bandwidth_gbs"] = h2d_gbs;
      j["streamed_bytes"] = gen.backend().streamed_bytes_per_pass();
    }
    if (grammar) {
      j["grammar"] = constraint_file;
      j["tg_grammar_tps"] = tggs.mean;
      j["tg_grammar_tps_stddev"] = tggs.stddev;
      j["tg_grammar_ratio"] = grammar_ratio;
      j["grammar_step_ms"] = grammar_ms_per_token;
      j["plain_step_ms"] = plain_ms_per_token;
      j["grammar_mask_compute_ms"] = grammar->mask_compute_seconds() * 1e3;
      j["grammar_masks_computed"] = grammar->masks_computed();
      j["grammar_masks_cached"] = grammar->masks_cached();
      j["grammar_texts_ended"] = texts_ended;
    }
    j["tg_weight_gbs"] = tg_gbs;
    j["tg_bandwidth_share"] = share;
    j["model_bytes"] = model_bytes;
    j["weight_bytes_per_token"] = per_token;
    j["weights"] = a.mmap ? "mmap" : "huge-page copy";
    j["device"] = model::device_name(device.kind);
    j["backend"] = gen.backend().description();
    j["interleaved_matrices"] = model->interleaved_matrices();
    j["interleaved_decode_streams"] = kernels::interleaved_decode_streams();
    j["cpu"] = kernels::cpu_model();
    j["kernels"] = nlohmann::json::array();
    for (const auto& [type, interleaved] : model->matmul_kinds()) {
      const kernels::KernelFamilies f = kernels::kernel_families(type, interleaved);
      j["kernels"].push_back({{"type", std::string(gguf::type_name(type))},
                              {"interleaved", interleaved},
                              {"decode", f.decode},
                              {"batch", f.batch},
                              {"plan", kernels::describe_plans(type, interleaved)}});
    }
    std::puts(j.dump().c_str());
    return;
  }
  std::printf("| model | size | threads | test | t/s |\n|---|---|---|---|---|\n");
  const double mib = double(model_bytes) / (1 << 20);
  const std::string at = a.depth > 0 ? " @ d" + std::to_string(a.depth) : "";  // llama-bench's notation
  if (a.p > 0)
    std::printf("| %s | %.1f MiB | %d | pp%d%s | %.2f ± %.2f |\n", a.model.c_str(), mib, a.threads, a.p, at.c_str(),
                pps.mean, pps.stddev);
  if (a.n > 0)
    std::printf("| %s | %.1f MiB | %d | tg%d%s | %.2f ± %.2f |\n", a.model.c_str(), mib, a.threads, a.n, at.c_str(),
                tgs.mean, tgs.stddev);
  if (grammar) {
    std::printf("| %s | %.1f MiB | %d | tg%d%s grammar | %.2f ± %.2f |\n", a.model.c_str(), mib, a.threads, a.n,
                at.c_str(), tggs.mean, tggs.stddev);
    std::printf("grammar %s: %.3f of unconstrained decode; sampling %.3f ms/token with the grammar, %.3f without; "
                "masks computed %llu (%.1f ms in all), cached %llu; %d texts ended; first text: %s\n",
                constraint_file.c_str(), grammar_ratio, grammar_ms_per_token, plain_ms_per_token,
                static_cast<unsigned long long>(grammar->masks_computed()), grammar->mask_compute_seconds() * 1e3,
                static_cast<unsigned long long>(grammar->masks_cached()), texts_ended,
                nlohmann::json(sample_text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  std::printf("backend: %s\n", gen.backend().description().c_str());
  std::printf("weights: %s, %d matrices in the interleaved layout (decode streams: %d)\n",
              a.mmap ? "mapped file (--mmap)" : "copied into huge pages", model->interleaved_matrices(),
              kernels::interleaved_decode_streams());
  std::printf("cpu: %s; kernels (decode / batch):", kernels::cpu_model().c_str());
  for (const auto& [type, interleaved] : model->matmul_kinds()) {
    const kernels::KernelFamilies f = kernels::kernel_families(type, interleaved);
    std::printf(" %s%s %s / %s;", std::string(gguf::type_name(type)).c_str(), interleaved ? " (interleaved)" : "",
                f.decode, f.batch);
  }
  std::printf("\n");
  for (const auto& [type, interleaved] : model->matmul_kinds()) {
    std::printf("matmul plan, %s%s: %s\n", std::string(gguf::type_name(type)).c_str(),
                interleaved ? " (interleaved)" : "", kernels::describe_plans(type, interleaved).c_str());
  }
  std::printf("%s bandwidth probe: %.2f GB/s; decode reads %.1f MiB/token = %.2f GB/s: share %.2f\n",
              cuda ? "GPU device-copy" : "read", bw_gbs, double(per_token) / (1 << 20), tg_gbs, share);
  if (cuda) std::printf("host-to-device bandwidth: %.2f GB/s\n", h2d_gbs);
}

void setup_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Measure prefill/decode tokens per second and decode's memory-bandwidth share");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--n-prompt", args->p, "prompt tokens prefilled in one batch (0: skip)");
  cmd->add_option("-n,--n-gen", args->n, "tokens decoded one at a time (0: skip)");
  cmd->add_option("-d,--depth", args->depth, "tokens already in the context when pp and tg start (prefilled, untimed)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-t,--threads", args->threads, "compute threads")->check(CLI::Range(1, 1024));
  cmd->add_option("-r,--repetitions", args->reps, "repetitions (mean ± stddev)")->check(CLI::Range(1, 1000));
  cmd->add_option("--probe-mib", args->probe_mib, "bandwidth probe array size in MiB")->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->add_option("--embed", args->embed,
                  "embedding throughput instead: sequences of this many tokens per second (mean pooling)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--embed-seqs", args->embed_seqs, "sequences per repetition of --embed")->check(CLI::Range(1, 4096));
  cmd->add_flag("--mmap", args->mmap, "map the model file instead of copying it into huge pages");
  auto* grammar_flag = cmd->add_option("--grammar", args->grammar_file,
                  "GBNF grammar file: tg runs through the sampler (defaults, seed 1) unconstrained and constrained, "
                  "alternating, and reports both and their ratio")
      ->check(CLI::ExistingFile);
  cmd->add_option("--json-schema", args->json_schema_file,
                  "JSON schema file: as --grammar, with the schema's grammar (what INFER.GENERATE JSONSCHEMA decodes under)")
      ->check(CLI::ExistingFile)
      ->excludes(grammar_flag);
  add_device_flags(cmd, args->device);
  cmd->callback([args] { run_bench(*args); });
}

RegisterCommand reg("bench", setup_bench);

}  // namespace
}  // namespace infer::cli
