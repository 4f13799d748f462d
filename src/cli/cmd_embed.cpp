// `infer embed -m FILE -p TEXT [--pooling none|mean|cls|last] [--normalize] [--json]`: one prompt's
// embedding through the engine, pooled as asked or as the model's metadata says. Plain output is the
// floats on one line (one line per token with --pooling none); --json prints
// {"prompt_ids": [...], "embedding": [...]} or, unpooled, {"prompt_ids": [...], "embeddings": [[...], ...]}.
// Vectors are as the model computes them unless --normalize (L2, per vector).
#include <cstdio>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "cli/device_flags.h"
#include "engine/engine.h"
#include "gguf/file.h"
#include "model/hparams.h"
#include "tokenizer/tokenizer.h"

namespace infer::cli {
namespace {

struct EmbedArgs {
  std::string model;
  std::string prompt;
  std::string pooling = "default";
  bool normalize = false;
  bool json = false;
  int threads = 1;
  bool mmap = false;
  std::string kv_type = "f16";
};

engine::Pooling parse_pooling(const std::string& name) {
  if (name == "default") return engine::Pooling::Default;
  if (name == "none") return engine::Pooling::None;
  if (name == "mean") return engine::Pooling::Mean;
  if (name == "cls") return engine::Pooling::Cls;
  if (name == "last") return engine::Pooling::Last;
  throw std::invalid_argument("--pooling: '" + name + "' is not one of none, mean, cls, last");
}

void run_embed(const EmbedArgs& a) {
  const engine::Pooling pooling = parse_pooling(a.pooling);
  engine::EngineOptions o;
  o.model_path = a.model;
  o.mmap = a.mmap;
  o.threads = a.threads;
  o.max_running = 1;
  o.queue_depth = 1;
  // the whole prompt in one step (a bert model needs it): the model's training context, read from the
  // header of the mapped file before the engine loads it
  o.context = o.step_tokens = model::read_hparams(*gguf::File::open(a.model)).n_ctx_train;
  o.prefix_cache = false;
  o.device.kv_type = kernels::parse_kv_type(a.kv_type);
  auto e = engine::Engine::create(o);

  engine::Request r;
  r.prompt_ids = e->tokenizer().encode(a.prompt);
  r.embedding = true;
  r.pooling = pooling;
  r.normalize = a.normalize;
  const std::vector<int32_t> ids = r.prompt_ids;
  std::promise<engine::Result> done;
  engine::Callbacks cb;
  cb.on_done = [&done](engine::Result&& res) { done.set_value(std::move(res)); };
  auto submitted = e->submit(std::move(r), std::move(cb));
  if (const auto* err = std::get_if<engine::SubmitError>(&submitted)) throw std::runtime_error("embed: " + err->message);
  const engine::Result res = done.get_future().get();
  if (res.finish != engine::FinishReason::Stop) throw std::runtime_error("embed: " + res.error);

  const size_t E = size_t(e->n_embd());
  const size_t n_rows = res.embedding.size() / E;
  const bool rows = n_rows != 1 || (pooling == engine::Pooling::None);
  if (a.json) {
    nlohmann::ordered_json j;  // prompt_ids first, as documented
    j["prompt_ids"] = ids;
    if (rows) {
      auto& list = j["embeddings"] = nlohmann::ordered_json::array();
      for (size_t t = 0; t < n_rows; ++t) list.push_back(std::vector<float>(&res.embedding[t * E], &res.embedding[(t + 1) * E]));
    } else {
      j["embedding"] = res.embedding;
    }
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  for (size_t t = 0; t < n_rows; ++t) {
    std::string line;
    for (size_t i = 0; i < E; ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.6g", i ? " " : "", double(res.embedding[t * E + i]));
      line += buf;
    }
    std::printf("%s\n", line.c_str());
  }
}

void setup_embed(CLI::App& app) {
  auto args = std::make_shared<EmbedArgs>();
  auto* cmd = app.add_subcommand("embed", "Embed one prompt (bert embedders, or any model's hidden states)");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("-p,--prompt", args->prompt, "Text to embed")->required();
  cmd->add_option("--pooling", args->pooling,
                  "none (every token), mean, cls (first token), last; default: the model's pooling_type, else last");
  cmd->add_flag("--normalize", args->normalize, "L2-normalise each vector (default: as the model computes it)");
  cmd->add_flag("--json", args->json, "Print one JSON object with prompt_ids and the embedding(s)");
  cmd->add_option("-t,--threads", args->threads, "Compute threads")->check(CLI::Range(1, 1024));
  cmd->add_flag("--mmap", args->mmap, "Map the model file instead of copying it into memory");
  cmd->add_option("--kv-type", args->kv_type, kKvTypeHelp)->check(CLI::IsMember({"f16", "q8_0", "q4_0"}));
  cmd->callback([args] { run_embed(*args); });
}

RegisterCommand reg_embed("embed", setup_embed);

}  // namespace
}  // namespace infer::cli
