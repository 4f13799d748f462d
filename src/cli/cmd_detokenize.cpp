// `infer detokenize -m FILE [--special] ID...`: token ids → text with the model's vocabulary.
// Control tokens (BOS, <|im_end|> ...) are left out unless --special is given.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command_registry.h"
#include "gguf/file.h"
#include "tokenizer/tokenizer.h"

namespace infer::cli {
namespace {

struct DetokenizeArgs {
  std::string model;
  std::vector<std::string> ids;
  bool special = false;
};

tokenizer::TokenId parse_id(const std::string& s, int n_vocab) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty()) throw std::runtime_error("detokenize: '" + s + "' is not a token id");
  if (v < 0 || v >= n_vocab)
    throw std::runtime_error("detokenize: token id " + s + " is outside [0, " + std::to_string(n_vocab) + ")");
  return static_cast<tokenizer::TokenId>(v);
}

void run_detokenize(const DetokenizeArgs& a) {
  const auto file = gguf::File::open(a.model);
  const auto tok = tokenizer::Tokenizer::from_gguf(*file);
  std::vector<tokenizer::TokenId> ids;
  for (const auto& s : a.ids) ids.push_back(parse_id(s, tok->n_vocab()));
  const std::string text = tok->decode(ids, /*remove_special=*/!a.special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

void setup_detokenize(CLI::App& app) {
  auto args = std::make_shared<DetokenizeArgs>();
  auto* cmd = app.add_subcommand("detokenize", "Turn token ids into text with a model's vocabulary");
  cmd->add_option("-m,--model", args->model, "GGUF model or vocab file")->required();
  cmd->add_flag("--special", args->special, "Show control tokens (BOS, <|im_end|> ...) as their text");
  cmd->add_option("ids", args->ids, "Token ids")->required();
  cmd->callback([args] { run_detokenize(*args); });
}

RegisterCommand reg_detokenize("detokenize", setup_detokenize);

}  // namespace
}  // namespace infer::cli
