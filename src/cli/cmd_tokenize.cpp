// `infer tokenize -m FILE [--no-bos] [--no-special] [--pieces] [--blob] TEXT|-`: text → token ids with
// the model's own vocabulary. Ids print on one line; --pieces prints "id<TAB>piece" per line; --blob
// writes the token blob format (tokenizer/token_blob.h) to stdout, ready for
// `redis-cli -x SET key < doc.tok`. "-" reads the text from stdin.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli/command_registry.h"
#include "gguf/file.h"
#include "tokenizer/token_blob.h"
#include "tokenizer/tokenizer.h"

namespace infer::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool no_bos = false;
  bool no_special = false;
  bool pieces = false;
  bool blob = false;
};

// Piece text with control bytes escaped so that one piece stays on one line.
std::string printable(const std::string& piece) {
  std::string out;
  for (unsigned char c : piece) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out;
}

void run_tokenize(const TokenizeArgs& a) {
  if (a.pieces && a.blob) throw std::runtime_error("tokenize: --pieces and --blob cannot be combined");
  std::string text = a.text;
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  const auto file = gguf::File::open(a.model);
  const auto tok = tokenizer::Tokenizer::from_gguf(*file);
  const auto ids = tok->encode(text, {.add_special = !a.no_bos, .parse_special = !a.no_special});
  if (a.blob) {
    const std::string blob = tokenizer::encode_blob(ids, tok->fingerprint());
    if (std::fwrite(blob.data(), 1, blob.size(), stdout) != blob.size() || std::fflush(stdout) != 0)
      throw std::runtime_error("tokenize: writing the blob to stdout failed");
    return;
  }
  if (a.pieces) {
    for (auto id : ids) std::printf("%d\t%s\n", id, printable(tok->token_to_piece(id, false)).c_str());
    return;
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
}

void setup_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "Turn text into token ids with a model's vocabulary");
  cmd->add_option("-m,--model", args->model, "GGUF model or vocab file")->required();
  cmd->add_flag("--no-bos", args->no_bos, "Do not add BOS/EOS even if the vocabulary asks for them");
  cmd->add_flag("--no-special", args->no_special, "Treat special-token text like <|im_end|> as plain text");
  cmd->add_flag("--pieces", args->pieces, "Print one 'id<TAB>piece' line per token");
  cmd->add_flag("--blob", args->blob, "Write the binary token blob (with vocabulary fingerprint) to stdout");
  cmd->add_option("text", args->text, "Text to tokenize, or - to read stdin")->required();
  cmd->callback([args] { run_tokenize(*args); });
}

RegisterCommand reg_tokenize("tokenize", setup_tokenize);

}  // namespace
}  // namespace infer::cli
