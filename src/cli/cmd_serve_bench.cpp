// `infer serve-bench`: serving throughput and latency through the Engine API (continuous batching).
// For each concurrency level C a fresh engine with C slots serves C closed-loop clients, each sending
// `rounds` requests of --prompt-tokens random ids and --gen-tokens generated tokens one after another.
// Reports decode tok/s (the rows of the level's decode-only steps over their wall time: the steady rate
// of C sequences decoding together, as llama-batched-bench's S_TG; steps that also ran a prefill chunk
// are prefill work and left out), end-to-end tok/s (generated tokens / wall time of the level, prefills
// included) and time-to-first-token p50/p99; --json adds each request's own decode rate (tokens after
// its first / time after its first, other requests' prefill chunks included: what one client sees). With --shared-prefix N every prompt starts with the same N tokens: the
// level also measures one cold and one warm request alone, and the prefix cache's token hit rate.
// Each level also reports its engine's memory plan: the KV pool (bytes and tokens: room for every slot's
// full context), and once, the weights' bytes, KV bytes per token and the per-sequence cap.
// With --repeats N the whole list of levels runs N times, levels alternating (1, 8, 1, 8, ...), so that
// a drift in the host's speed reaches every level alike: each level reports its median decode tok/s,
// its range, TTFT percentiles over all its requests, and the median of its ratios to the first level
// measured in the same repeat (the "vs first" column, also without repeats).
// --profile splits the decode step into phases, and rates the attention phase's reads (the KV bytes a
// step read over its time) against a read-bandwidth probe run in this process after each run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "cli/device_flags.h"
#include "cli/grammar_flags.h"
#include "engine/engine.h"
#include "kernels/runtime/bandwidth.h"

namespace infer::cli {
namespace {

struct ServeBenchArgs {
  std::string model;
  std::string concurrency = "1,2,4,8,16";
  int prompt_tokens = 128;
  int gen_tokens = 128;
  int threads = 0;
  int rounds = 2;
  int repeats = 1;
  int shared_prefix = 0;
  int step_tokens = 512;
  bool no_prefix_cache = false;
  bool json = false;
  bool mmap = false;
  bool profile = false;
  int probe_mib = 1024;  // the read-bandwidth probe after each run (--profile, CPU backend); 0: none
  std::vector<std::string> grammar_files;  // GBNF; client k's requests use file k mod their count
  std::vector<std::string> json_schema_files;  // converted to GBNF and listed after grammar_files
  std::vector<std::string> grammar_texts;  // read from grammar_files before the first level
  DeviceArgs device;
  model::DeviceOptions device_options;  // resolved from `device` before the first level
};

struct LevelResult {
  int concurrency = 0;
  double decode_tps = 0, end_to_end_tps = 0, ttft_p50_ms = 0, ttft_p99_ms = 0;
  double request_decode_tps = 0;  // the mean of each request's own decode rate
  uint64_t generated = 0;
  double wall_s = 0;
  double ttft_cold_ms = 0, ttft_warm_ms = 0, cache_hit_rate = 0;
  std::vector<double> ttft_ms;          // every request's TTFT
  std::vector<double> decode_tps_runs;  // decode_tps of each repeat, in the order they ran
  double ratio_to_first = 0;            // median over repeats of decode_tps / the first level's
  engine::EngineStats plan;  // the engine's memory plan (kv_bytes, model_bytes, pages, per-sequence cap)
  engine::DecodeProfile profile;  // the level's decode-only steps (warm-up excluded); phases with --profile
  double probe_gbs = 0;  // --profile: the read-bandwidth probe right after the run (a level: its runs' median)
  std::string backend;            // the engine's backend description
  int64_t kv_pool_tokens() const { return int64_t(plan.kv_pages_total) * plan.kv_page_tokens; }
};

std::vector<int> parse_levels(const std::string& list) {
  std::vector<int> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1 || v > 4096)
      throw std::invalid_argument("--concurrency: '" + item + "' is not a count in [1, 4096]");
    out.push_back(v);
  }
  if (out.empty()) throw std::invalid_argument("--concurrency: no levels given");
  return out;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5));
  return v[i];
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Submits one request and waits for its result (the bench is a closed-loop client).
engine::Result run_one(engine::Engine& e, std::vector<int32_t> prompt, int gen_tokens, uint64_t seed,
                       std::shared_ptr<const grammar::CompiledGrammar> grammar = nullptr) {
  engine::Request r;
  r.prompt_ids = std::move(prompt);
  r.max_tokens = gen_tokens;
  r.sampling.seed = seed;
  r.grammar = std::move(grammar);
  auto done = std::make_shared<std::promise<engine::Result>>();
  auto fut = done->get_future();
  engine::Callbacks cb;
  cb.on_done = [done](engine::Result&& res) { done->set_value(std::move(res)); };
  for (;;) {
    auto sub = e.submit(r, cb);
    if (std::holds_alternative<engine::Handle>(sub)) break;
    const auto& err = std::get<engine::SubmitError>(sub);
    if (err.kind != engine::SubmitError::Kind::Busy) throw std::runtime_error("serve-bench: request refused: " + err.message);
    std::this_thread::sleep_for(std::chrono::milliseconds(err.retry_after_ms));
  }
  engine::Result res = fut.get();
  if (res.finish == engine::FinishReason::Error) throw std::runtime_error("serve-bench: request failed: " + res.error);
  return res;
}

LevelResult run_level(const ServeBenchArgs& a, int c) {
  engine::EngineOptions o;
  o.model_path = a.model;
  o.mmap = a.mmap;
  o.threads = a.threads;
  o.max_running = c;
  o.queue_depth = std::max(16, c);
  o.context = a.prompt_tokens + a.gen_tokens + 1;
  o.step_tokens = a.step_tokens;
  o.prefix_cache = !a.no_prefix_cache;
  o.profile = a.profile;
  o.device = a.device_options;
  auto e = engine::Engine::create(o);
  const int n_vocab = e->n_vocab();

  std::mt19937_64 rng(uint64_t(c) * 7919 + 1);
  auto random_ids = [&](int n) {
    std::vector<int32_t> v(size_t(std::max(n, 0)));
    for (auto& x : v) x = int32_t(rng() % uint64_t(n_vocab));
    return v;
  };
  const std::vector<int32_t> prefix = random_ids(a.shared_prefix);
  auto make_prompt = [&] {
    std::vector<int32_t> p = prefix;
    auto tail = random_ids(a.prompt_tokens - int(prefix.size()));
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };

  LevelResult out;
  out.concurrency = c;
  out.plan = e->stats();
  out.backend = e->backend_description();
  // Warm-up (faults the weights in): at most 8 prompt tokens and 4 generated, inside the context.
  run_one(*e, random_ids(std::min(8, a.prompt_tokens)), std::min(4, a.gen_tokens), 1);
  if (a.shared_prefix > 0) {
    out.ttft_cold_ms = run_one(*e, make_prompt(), 1, 2).timings.ttft_ms;
    out.ttft_warm_ms = run_one(*e, make_prompt(), 1, 3).timings.ttft_ms;
  }
  const engine::EngineStats before = e->stats();

  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < c * a.rounds; ++i) prompts.push_back(make_prompt());
  // Compiled once per text and vocabulary (cached): a later level finds the masks the first computed.
  std::vector<std::shared_ptr<const grammar::CompiledGrammar>> grammars;
  for (const std::string& text : a.grammar_texts) grammars.push_back(grammar::compile_grammar(text, e->tokenizer()));
  std::vector<engine::Result> results(prompts.size());
  std::vector<std::exception_ptr> errors(static_cast<size_t>(c));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int k = 0; k < c; ++k)
    clients.emplace_back([&, k] {
      try {
        for (int r = 0; r < a.rounds; ++r) {
          const size_t i = size_t(k * a.rounds + r);
          results[i] = run_one(*e, prompts[i], a.gen_tokens, 100 + i,
                               grammars.empty() ? nullptr : grammars[size_t(k) % grammars.size()]);
        }
      } catch (...) {
        errors[size_t(k)] = std::current_exception();
      }
    });
  for (auto& t : clients) t.join();
  for (auto& err : errors)
    if (err) std::rethrow_exception(err);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  double decode_rate_sum = 0;
  for (const auto& r : results) {
    out.ttft_ms.push_back(r.timings.ttft_ms);
    out.generated += uint64_t(r.timings.generated_tokens);
    decode_rate_sum += r.timings.decode_tps;
  }
  out.request_decode_tps = results.empty() ? 0 : decode_rate_sum / double(results.size());
  out.end_to_end_tps = out.wall_s > 0 ? double(out.generated) / out.wall_s : 0;
  const engine::EngineStats after = e->stats();
  out.profile = after.decode_profile.since(before.decode_profile);
  out.decode_tps = out.profile.wall_s > 0 ? double(out.profile.rows) / out.profile.wall_s : 0;
  const double prompt = double(after.prompt_tokens - before.prompt_tokens);
  if (prompt > 0) out.cache_hit_rate = double(after.cached_tokens - before.cached_tokens) / prompt;
  return out;
}

// One level's result over its repeats (`runs`, in order), given the first level's runs of the same
// repeats: medians of the rates, TTFT percentiles over every request, profiles summed.
LevelResult summarise(const std::vector<LevelResult>& runs, const std::vector<LevelResult>& first) {
  LevelResult out;
  out.concurrency = runs.front().concurrency;
  out.plan = runs.front().plan;
  out.backend = runs.front().backend;
  std::vector<double> e2e, cold, warm, hit, ratios, request, probes;
  for (size_t r = 0; r < runs.size(); ++r) {
    const LevelResult& run = runs[r];
    out.decode_tps_runs.push_back(run.decode_tps);
    ratios.push_back(first[r].decode_tps > 0 ? run.decode_tps / first[r].decode_tps : 0);
    e2e.push_back(run.end_to_end_tps);
    request.push_back(run.request_decode_tps);
    cold.push_back(run.ttft_cold_ms);
    warm.push_back(run.ttft_warm_ms);
    hit.push_back(run.cache_hit_rate);
    out.ttft_ms.insert(out.ttft_ms.end(), run.ttft_ms.begin(), run.ttft_ms.end());
    out.generated += run.generated;
    out.wall_s += run.wall_s;
    out.profile.add(run.profile);
    if (run.probe_gbs > 0) probes.push_back(run.probe_gbs);
  }
  out.probe_gbs = median(probes);
  out.decode_tps = median(out.decode_tps_runs);
  out.ratio_to_first = median(ratios);
  out.end_to_end_tps = median(e2e);
  out.request_decode_tps = median(request);
  out.ttft_p50_ms = percentile(out.ttft_ms, 0.50);
  out.ttft_p99_ms = percentile(out.ttft_ms, 0.99);
  out.ttft_cold_ms = median(cold);
  out.ttft_warm_ms = median(warm);
  out.cache_hit_rate = median(hit);
  return out;
}

// The columns of --profile: a decode step's phases, as milliseconds per step.
struct ProfileColumn {
  const char* header;
  const char* key;  // in --json
  double value_s(const engine::DecodeProfile& p) const { return pass ? p.forward.*pass : p.after_pass_s; }
  double model::PassProfile::*pass;  // null: the time after the pass
};
constexpr ProfileColumn kProfileColumns[] = {
    {"qkv", "qkv_ms", &model::PassProfile::qkv_s},
    {"attention", "attention_ms", &model::PassProfile::attention_s},
    {"output", "output_ms", &model::PassProfile::output_s},
    {"ffn up", "ffn_up_ms", &model::PassProfile::ffn_up_s},
    {"ffn down", "ffn_down_ms", &model::PassProfile::ffn_down_s},
    {"classifier", "classifier_ms", &model::PassProfile::classifier_s},
    {"other", "other_ms", &model::PassProfile::other_s},
    {"after pass", "after_pass_ms", nullptr},
};

double per_step_ms(const engine::DecodeProfile& p, double seconds) {
  return p.steps ? 1e3 * seconds / double(p.steps) : 0;
}
double step_ms(const engine::DecodeProfile& p) { return per_step_ms(p, p.wall_s); }
double rows_per_step(const engine::DecodeProfile& p) { return p.steps ? double(p.rows) / double(p.steps) : 0; }

// The attention phase's reads: the KV bytes of a decode step, and their rate over the phase's time
// (none where the backend counts no bytes: the GPU's).
double attention_mb_per_step(const engine::DecodeProfile& p) {
  return p.steps ? p.forward.attention_bytes / double(p.steps) / 1e6 : 0;
}
double attention_gbs(const engine::DecodeProfile& p) {
  return p.forward.attention_s > 0 ? p.forward.attention_bytes / p.forward.attention_s / 1e9 : 0;
}

// probe_gbs: the level's read-bandwidth probe (0: not run).
nlohmann::ordered_json profile_json(const engine::DecodeProfile& p, double probe_gbs) {
  nlohmann::ordered_json j = {{"steps", p.steps}, {"rows_per_step", rows_per_step(p)}};
  for (const ProfileColumn& c : kProfileColumns) j[c.key] = per_step_ms(p, c.value_s(p));
  j["step_ms"] = step_ms(p);
  if (p.forward.attention_bytes > 0) {
    j["attention_mb_per_step"] = attention_mb_per_step(p);
    j["attention_gbs"] = attention_gbs(p);
    if (probe_gbs > 0) j["attention_share_of_probe"] = attention_gbs(p) / probe_gbs;
  }
  return j;
}

void print_profiles(const std::vector<LevelResult>& levels, int probe_threads) {
  std::printf("\ndecode step profile (ms per step; steps that ran decode rows only):\n%-12s %7s %6s", "concurrency",
              "steps", "rows");
  for (const ProfileColumn& c : kProfileColumns) std::printf(" %10s", c.header);
  std::printf(" %10s\n", "step");
  for (const LevelResult& r : levels) {
    const engine::DecodeProfile& p = r.profile;
    std::printf("%-12d %7llu %6.1f", r.concurrency, static_cast<unsigned long long>(p.steps), rows_per_step(p));
    for (const ProfileColumn& c : kProfileColumns) std::printf(" %10.3f", per_step_ms(p, c.value_s(p)));
    std::printf(" %10.3f\n", step_ms(p));
  }
  if (std::none_of(levels.begin(), levels.end(), [](const LevelResult& r) { return r.profile.forward.attention_bytes > 0; })) {
    return;
  }
  std::printf("\nattention's reads (keys and values of every layer, per decode step), against a read-bandwidth probe "
              "(%d threads) run right after each of the level's runs (their median):\n%-12s %12s %10s %12s %10s\n",
              probe_threads, "concurrency", "MB a step", "GB/s", "probe GB/s", "of probe");
  for (const LevelResult& r : levels) {
    const engine::DecodeProfile& p = r.profile;
    std::printf("%-12d %12.1f %10.1f", r.concurrency, attention_mb_per_step(p), attention_gbs(p));
    if (r.probe_gbs > 0) {
      std::printf(" %12.1f %10.2f\n", r.probe_gbs, attention_gbs(p) / r.probe_gbs);
    } else {
      std::printf(" %12s %10s\n", "-", "-");
    }
  }
}

nlohmann::ordered_json json_row(const ServeBenchArgs& a, const LevelResult& r) {
  nlohmann::ordered_json row = {{"concurrency", r.concurrency},
                                {"decode_tps", r.decode_tps},
                                {"end_to_end_tps", r.end_to_end_tps},
                                {"ttft_p50_ms", r.ttft_p50_ms},
                                {"ttft_p99_ms", r.ttft_p99_ms},
                                {"decode_tps_runs", r.decode_tps_runs},
                                {"ratio_to_first", r.ratio_to_first},
                                {"request_decode_tps", r.request_decode_tps}};
  if (a.shared_prefix > 0) {
    row["ttft_cold_ms"] = r.ttft_cold_ms;
    row["ttft_warm_ms"] = r.ttft_warm_ms;
    row["cache_hit_rate"] = r.cache_hit_rate;
  }
  row["model_bytes"] = r.plan.model_bytes;
  row["kv_bytes_per_token"] = r.plan.kv_bytes_per_token;
  row["kv_type"] = kernels::kv_type_name(r.plan.kv_type);
  row["kv_pool_bytes"] = r.plan.kv_bytes;
  row["kv_pool_tokens"] = r.kv_pool_tokens();
  row["kv_page_tokens"] = r.plan.kv_page_tokens;
  row["max_seq_tokens"] = r.plan.max_seq_tokens;
  row["device"] = model::device_name(r.plan.device);
  row["backend"] = r.backend;
  if (a.profile) row["decode_profile"] = profile_json(r.profile, r.probe_gbs);
  if (r.probe_gbs > 0) row["bandwidth_probe_gbs"] = r.probe_gbs;
  return row;
}

constexpr double kMiB = 1024.0 * 1024.0;

// The plan's parts that do not depend on the level, then the table's header.
void print_header(const ServeBenchArgs& a, const LevelResult& r) {
  std::printf("backend: %s\n", r.backend.c_str());
  std::printf("memory: weights %.1f MiB, KV %.1f KiB per token (%s, pages of %d tokens), per-sequence cap %d tokens\n",
              double(r.plan.model_bytes) / kMiB, double(r.plan.kv_bytes_per_token) / 1024.0,
              kernels::kv_type_name(r.plan.kv_type), r.plan.kv_page_tokens, r.plan.max_seq_tokens);
  std::printf("%-12s %12s %8s %12s %14s %14s %12s %10s", "concurrency", "decode tok/s", "vs first", "e2e tok/s",
              "ttft p50 ms", "ttft p99 ms", "kv pool MiB", "kv tokens");
  if (a.shared_prefix > 0) std::printf(" %13s %13s %10s", "ttft cold ms", "ttft warm ms", "cache hit");
  if (a.repeats > 1) std::printf(" %17s", "decode min-max");
  std::printf("\n");
}

void print_row(const ServeBenchArgs& a, const LevelResult& r) {
  std::printf("%-12d %12.1f %8.2f %12.1f %14.2f %14.2f %12.1f %10lld", r.concurrency, r.decode_tps, r.ratio_to_first,
              r.end_to_end_tps, r.ttft_p50_ms, r.ttft_p99_ms, double(r.plan.kv_bytes) / kMiB,
              static_cast<long long>(r.kv_pool_tokens()));
  if (a.shared_prefix > 0) std::printf(" %13.2f %13.2f %9.1f%%", r.ttft_cold_ms, r.ttft_warm_ms, 100 * r.cache_hit_rate);
  if (a.repeats > 1) {
    const auto [lo, hi] = std::minmax_element(r.decode_tps_runs.begin(), r.decode_tps_runs.end());
    std::printf(" %17s", (std::to_string(int(*lo + 0.5)) + "-" + std::to_string(int(*hi + 0.5))).c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
}

void run_serve_bench(ServeBenchArgs a) {
  if (a.prompt_tokens < 1 || a.gen_tokens < 1 || a.rounds < 1 || a.repeats < 1)
    throw std::invalid_argument("serve-bench: --prompt-tokens, --gen-tokens, --rounds and --repeats must be >= 1");
  // Each prompt needs at least one token of its own after the shared part (its question).
  if (a.shared_prefix < 0 || a.shared_prefix >= a.prompt_tokens)
    throw std::invalid_argument("serve-bench: --shared-prefix must be in [0, --prompt-tokens)");
  const std::vector<int> levels = parse_levels(a.concurrency);
  a.device_options = device_options(a.device);
  for (const std::string& f : a.grammar_files) a.grammar_texts.push_back(read_grammar_file(f));
  for (const std::string& f : a.json_schema_files) a.grammar_texts.push_back(read_json_schema_file(f));
  std::vector<std::vector<LevelResult>> runs(levels.size());  // [level][repeat]
  std::vector<LevelResult> results(levels.size());
  const size_t total = levels.size() * size_t(a.repeats);
  size_t done = 0;
  // --profile: the attention phase's rate against the memory's, probed in this process right after
  // each run (the host's memory speed moves within minutes), where the backend counts the bytes (CPU).
  const int probe_threads = a.threads > 0 ? a.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::unique_ptr<kernels::ThreadPool> probe_pool;
  for (int rep = 0; rep < a.repeats; ++rep) {
    for (size_t i = 0; i < levels.size(); ++i) {
      runs[i].push_back(run_level(a, levels[i]));
      LevelResult& run = runs[i].back();
      if (a.profile && a.probe_mib > 0 && run.profile.forward.attention_bytes > 0) {
        if (!probe_pool) probe_pool = std::make_unique<kernels::ThreadPool>(probe_threads);
        run.probe_gbs = kernels::measure_read_bandwidth_gbs(*probe_pool, size_t(a.probe_mib) << 20, 3);
      }
      if (a.repeats > 1) {  // progress: a repeated list of levels runs for minutes
        std::fprintf(stderr, "serve-bench: run %zu/%zu: concurrency %d (repeat %d/%d), decode %.1f tok/s\n", ++done,
                     total, levels[i], rep + 1, a.repeats, runs[i].back().decode_tps);
      }
      if (rep + 1 < a.repeats) continue;
      // The level's last run: its result is final (the first level's runs of every repeat are in).
      results[i] = summarise(runs[i], runs[0]);
      if (a.json) continue;
      if (i == 0) print_header(a, results[i]);
      print_row(a, results[i]);
    }
  }
  if (a.json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const LevelResult& r : results) rows.push_back(json_row(a, r));
    std::printf("%s\n", rows.dump(2).c_str());
  } else if (a.profile) {
    print_profiles(results, probe_threads);
  }
}

void setup_serve_bench(CLI::App& app) {
  auto args = std::make_shared<ServeBenchArgs>();
  auto* cmd = app.add_subcommand("serve-bench", "Serving throughput and TTFT through the Engine at several concurrencies");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--concurrency", args->concurrency, "comma-separated concurrency levels (clients = slots)");
  cmd->add_option("--prompt-tokens", args->prompt_tokens, "prompt length in tokens (random ids)");
  cmd->add_option("--gen-tokens", args->gen_tokens, "tokens to generate per request (fewer on end-of-generation)");
  cmd->add_option("-t,--threads", args->threads, "compute threads (0: all cores)");
  cmd->add_option("--rounds", args->rounds, "requests per client, one after another");
  cmd->add_option("--repeats", args->repeats,
                  "run the list of levels this many times, alternating, and report medians (a drift in the "
                  "host's speed then reaches every level alike)");
  cmd->add_option("--shared-prefix", args->shared_prefix, "tokens every prompt shares (prefix cache); adds cold/warm TTFT and hit rate");
  cmd->add_option("--step-tokens", args->step_tokens, "per-step token budget of the scheduler");
  cmd->add_option("--grammar", args->grammar_files,
                  "GBNF grammar file (repeatable): client k's requests are constrained by file k mod their count "
                  "(a request ends where its grammar does)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--json-schema", args->json_schema_files,
                  "JSON schema file (repeatable), converted to GBNF; with --grammar, the schemas follow the "
                  "grammar files in the list that client k picks from")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--no-prefix-cache", args->no_prefix_cache, "run the engine with its prefix cache off (to compare)");
  cmd->add_flag("--mmap", args->mmap, "map the model file instead of copying it into huge pages");
  cmd->add_flag("--profile", args->profile, "time each decode step's phases (qkv, attention, ..., sampling) and print them per level");
  cmd->add_option("--probe-mib", args->probe_mib,
                  "with --profile: the read-bandwidth probe's array in MiB, run after each level's run to rate the "
                  "attention phase's reads against (0: no probe)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--json", args->json, "print a JSON list of {concurrency, decode_tps, ttft_p50_ms, ttft_p99_ms, memory plan, ...}");
  add_device_flags(cmd, args->device);
  cmd->callback([args] { run_serve_bench(*args); });
}

RegisterCommand reg("serve-bench", setup_serve_bench);

}  // namespace
}  // namespace infer::cli
