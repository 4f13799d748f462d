// `infer generate`: one prompt, one continuation, streamed to stdout (or one JSON object with --json).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "cli/device_flags.h"
#include "cli/grammar_flags.h"
#include "engine/generator.h"
#include "engine/logprobs_json.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace infer::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  int n = 128;
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  float frequency_penalty = 0.f;
  float presence_penalty = 0.f;
  int64_t seed = -1;
  int threads = 1;
  int context = 2048;
  bool chat = false;
  std::string chat_template;  // a template's name (tokenizer.chat_template.<name>) or a built-in format
  std::string system;         // a system turn first
  std::string messages_file;  // a JSON array of messages
  std::string tools_file;     // a JSON array of tools
  std::string chat_args;      // a JSON object of template variables
  bool json = false;
  bool mmap = false;
  std::string logits;  // "", "N" or "all"
  int logprobs = -1;   // -1: not asked
  std::string force;   // "ID,ID,..."
  std::vector<std::string> stop;
  std::string grammar_file;  // GBNF
  std::string json_schema_file;
  DeviceArgs device;
};

std::vector<int32_t> parse_ids(const std::string& list) {
  std::vector<int32_t> ids;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < INT32_MIN || v > INT32_MAX)
      throw std::invalid_argument("--force: '" + item + "' is not a token id");
    ids.push_back(int32_t(v));
  }
  if (ids.empty()) throw std::invalid_argument("--force: no token ids given");
  return ids;
}

int parse_logits(const std::string& s) {
  if (s.empty()) return 0;
  if (s == "all") return -1;
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || used == 0 || n <= 0) throw std::invalid_argument("--logits: expected a count > 0 or 'all', got '" + s + "'");
  return n;
}

nlohmann::json logits_json(const std::vector<engine::TopLogits>& rows) {
  auto out = nlohmann::json::array();
  for (const auto& row : rows) {
    auto r = nlohmann::json::array();
    for (auto [id, logit] : row) r.push_back({id, logit});
    out.push_back(std::move(r));
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(f), {}};
}

bool wants_chat(const GenerateArgs& a) {
  return a.chat || !a.chat_template.empty() || !a.system.empty() || !a.messages_file.empty() || !a.tools_file.empty() ||
         !a.chat_args.empty();
}

// The conversation of the chat flags: --system, the --messages file's turns, then -p as a user turn.
engine::ChatRequest chat_request(const GenerateArgs& a) {
  engine::ChatRequest c;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  if (!a.messages_file.empty()) {
    auto file = engine::parse_chat_json("--messages " + a.messages_file, read_file(a.messages_file));
    if (!file.is_array()) throw engine::ChatError("--messages " + a.messages_file + " must hold a JSON array");
    for (auto& m : file) messages.push_back(std::move(m));
  }
  if (!a.prompt.empty()) messages.push_back({{"role", "user"}, {"content", a.prompt}});
  c.messages = engine::normalize_messages(messages);
  if (!a.tools_file.empty()) {
    c.tools = engine::parse_chat_json("--tools " + a.tools_file, read_file(a.tools_file));
    if (!c.tools.is_array()) throw engine::ChatError("--tools " + a.tools_file + " must hold a JSON array");
  }
  if (!a.chat_args.empty()) {
    c.extra = engine::parse_chat_json("--chat-args", a.chat_args);
    if (!c.extra.is_object()) throw engine::ChatError("--chat-args must be a JSON object");
  }
  c.template_name = a.chat_template;
  return c;
}

void run_generate(const GenerateArgs& a) {
  if (a.prompt.empty() && a.messages_file.empty()) throw std::invalid_argument("-p/--prompt or --messages is required");
  engine::GenerateOptions g;
  auto& s = g.sampling;
  s.temperature = a.temp;
  s.top_k = a.top_k;
  s.top_p = a.top_p;
  s.min_p = a.min_p;
  s.repeat_penalty = a.repeat_penalty;
  s.penalty_last_n = a.repeat_last_n;
  s.frequency_penalty = a.frequency_penalty;
  s.presence_penalty = a.presence_penalty;
  if (a.seed >= 0) s.seed = uint64_t(a.seed);
  engine::validate_sampling(s);  // before the model loads: bad flags fail fast
  g.max_tokens = a.n;
  if (a.n < 0) throw std::invalid_argument("-n must be >= 0, got " + std::to_string(a.n));
  g.stop = a.stop;
  g.logits_top_n = parse_logits(a.logits);
  g.capture_prompt_logits = g.logits_top_n != 0;
  if (a.logprobs != -1 && !a.json) throw std::invalid_argument("--logprobs needs --json");
  g.logprobs = a.logprobs;
  if (!a.force.empty()) g.force = parse_ids(a.force);
  const model::DeviceOptions device = device_options(a.device);
  const std::string grammar_text = read_constraint_flags(a.grammar_file, a.json_schema_file);

  model::LoadOptions lo;
  lo.mmap = a.mmap;
  lo.context = a.context;
  auto model = model::Model::load(a.model, lo);
  auto tok = tokenizer::Tokenizer::from_gguf(model->file());
  if (!grammar_text.empty()) g.grammar = grammar::compile_grammar(grammar_text, *tok);
  auto prompt = wants_chat(a) ? engine::tokenize_chat(*tok, chat_request(a)) : engine::tokenize_prompt(*tok, a.prompt, false);
  engine::GeneratorOptions go;
  go.threads = a.threads;
  go.context = a.context;
  go.device = device;
  engine::Generator gen(*model, tok.get(), go);

  std::function<void(const std::string&)> on_text;
  if (!a.json)
    on_text = [](const std::string& piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
  auto r = gen.generate(prompt, g, on_text);

  if (a.json) {
    nlohmann::json j;
    j["prompt_ids"] = r.prompt_ids;
    j["ids"] = r.ids;
    // Invalid UTF-8 (a character cut by max tokens) is replaced rather than failing the dump.
    j["text"] = r.text;
    j["finish_reason"] = engine::finish_reason_name(r.finish);
    j["seed"] = r.seed;
    j["prefill_tps"] = r.prefill_tps;
    j["decode_tps"] = r.decode_tps;
    if (g.logits_top_n != 0) {
      j["prompt_logits"] = logits_json(r.prompt_logits);
      j["logits"] = logits_json(r.step_logits);
    }
    if (g.logprobs >= 0) {
      auto lp = nlohmann::json::array();
      for (const engine::TokenLogprobs& e : r.logprobs) lp.push_back(engine::logprobs_json(e));
      j["logprobs"] = std::move(lp);
    }
    std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::puts("");
  }
  std::fprintf(stderr, "prefill: %zu tokens, %.1f tok/s | decode: %zu tokens, %.1f tok/s | finish: %s | seed: %llu\n",
               r.prompt_ids.size(), r.prefill_tps, r.ids.size(), r.decode_tps, engine::finish_reason_name(r.finish),
               static_cast<unsigned long long>(r.seed));
}

void setup_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate a continuation of a prompt");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--prompt", args->prompt, "prompt text (with --chat: the last user turn)");
  cmd->add_option("-n,--n-predict", args->n, "tokens to generate at most (0: prompt logits only)");
  cmd->add_option("--temp", args->temp, "temperature (0 = greedy)");
  cmd->add_option("--top-k", args->top_k, "top-k (<= 0: off)");
  cmd->add_option("--top-p", args->top_p, "top-p in (0, 1] (1: off)");
  cmd->add_option("--min-p", args->min_p, "min-p in [0, 1] (0: off)");
  cmd->add_option("--repeat-penalty", args->repeat_penalty, "repetition penalty (1: off)");
  cmd->add_option("--repeat-last-n", args->repeat_last_n, "penalty window in tokens (-1: all, 0: off)");
  cmd->add_option("--frequency-penalty", args->frequency_penalty, "frequency penalty");
  cmd->add_option("--presence-penalty", args->presence_penalty, "presence penalty");
  cmd->add_option("-s,--seed", args->seed, "RNG seed (default: random, reported on stderr)");
  cmd->add_option("-t,--threads", args->threads, "compute threads")->check(CLI::Range(1, 1024));
  cmd->add_option("-c,--ctx-size", args->context, "context size in tokens")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--stop", args->stop, "stop string (repeatable); not included in the output");
  cmd->add_flag("--chat", args->chat, "render the prompt as a user turn through the model's chat template");
  cmd->add_option("--chat-template", args->chat_template,
                  "the model's template tokenizer.chat_template.NAME (e.g. tool_use), or a built-in format for a "
                  "model without one (chatml, llama3, ...); implies --chat");
  cmd->add_option("--system", args->system, "a system turn before the conversation; implies --chat");
  cmd->add_option("--messages", args->messages_file,
                  "JSON file: an array of OpenAI chat messages (before -p's user turn); implies --chat")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tools", args->tools_file, "JSON file: an array of OpenAI tools for the template; implies --chat")
      ->check(CLI::ExistingFile);
  cmd->add_option("--chat-args", args->chat_args,
                  "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'; implies --chat");
  cmd->add_flag("--json", args->json, "print one JSON object instead of streaming text");
  cmd->add_flag("--mmap", args->mmap, "map the model file instead of copying it into huge pages");
  cmd->add_option("--logits", args->logits, "with --json: top N logits (or 'all') per prompt position and step");
  cmd->add_option("--logprobs", args->logprobs,
                  "with --json: each generated token's log-probability and the N (0-20) most likely "
                  "alternatives, from the model's distribution before sampling")
      ->check(CLI::Range(0, engine::kMaxLogprobs));
  cmd->add_option("--force", args->force, "teacher forcing: feed these ids (ID,ID,...) as the generated tokens");
  auto* grammar_flag = cmd->add_option("--grammar", args->grammar_file,
                  "GBNF grammar file (llama.cpp's format): the output is a sentence of its language; generation "
                  "stops where the language ends")
      ->check(CLI::ExistingFile);
  cmd->add_option("--json-schema", args->json_schema_file,
                  "JSON schema file: the output is JSON the schema accepts (keywords: docs/redis.md, Constrained "
                  "output); generation stops where it is complete")
      ->check(CLI::ExistingFile)
      ->excludes(grammar_flag);
  add_device_flags(cmd, args->device);
  cmd->callback([args] { run_generate(*args); });
}

RegisterCommand reg("generate", setup_generate);

}  // namespace
}  // namespace infer::cli
