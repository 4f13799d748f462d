// `--grammar FILE` and `--json-schema FILE` (infer generate, infer bench): a GBNF file or a JSON schema
// file (converted to GBNF), checked before the model loads and compiled for the model's vocabulary after.
#pragma once
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "grammar/compiled_grammar.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
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

// The GBNF of the JSON schema in the file; throws std::invalid_argument naming the flag, the file and
// the schema error (the keyword or the byte offset, and where).
inline std::string read_json_schema_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("--json-schema " + path + ": cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return grammar::json_schema_text_to_gbnf(ss.str());
  } catch (const grammar::SchemaError& e) {
    throw std::invalid_argument("--json-schema " + path + ": " + e.what());
  }
}

// The GBNF of whichever of the two flags was given ("" for neither).
inline std::string read_constraint_flags(const std::string& grammar_file, const std::string& json_schema_file) {
  if (!grammar_file.empty()) return read_grammar_file(grammar_file);
  if (!json_schema_file.empty()) return read_json_schema_file(json_schema_file);
  return "";
}

}  // namespace infer::cli
