// `--grammar FILE` (infer generate, infer bench): a GBNF file, checked before the model loads and
// compiled for the model's vocabulary after.
#pragma once
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "grammar/compiled_grammar.h"
#include "grammar/gbnf.h"
#include "tokenizer/tokenizer.h"

namespace infer::cli {

// The file's text, parsed once so that a bad grammar fails fast; throws std::invalid_argument naming
// the flag, the file and the grammar error's line and column.
inline std::string read_grammar_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("--grammar " + path + ": cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  try {
    grammar::parse_gbnf(text);
  } catch (const grammar::GrammarError& e) {
    throw std::invalid_argument("--grammar " + path + ": " + e.what());
  }
  return text;
}

}  // namespace infer::cli
