// The reference implementation's outputs (../shared/reference/out/*.jsonl): every prompt must tokenise
// to its `prompt_ids` exactly (BOS as the metadata says, special text not parsed), and the pieces of
// `greedy_ids` must concatenate to `greedy_text` (or `greedy_bytes_hex`); embedding models' prompts
// likewise, with [CLS] and [SEP].
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "gguf/file.h"
#include "support/data_dirs.h"
#include "tokenizer/tokenizer.h"

namespace infer::tokenizer {
namespace {

namespace fs = std::filesystem;

std::string hex(const std::string& bytes) {
  std::string out;
  char buf[3];
  for (unsigned char c : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

std::string model_path_for(const std::string& stem) {
  if (stem == "stories260K") return test::models_dir() + "/stories260K.gguf";
  return test::reference_dir() + "/models/" + stem + ".gguf";
}

// The generative models' files, by name: a file added to reference/out is not covered until it is
// listed here (the tiny-bert-* files hold embeddings, not greedy continuations: kEmbeddingReferences).
const char* const kGenerativeReferences[] = {
    "stories260K",          "tiny-gemma3-f32",     "tiny-gemma3-q4_k_m",  "tiny-gemma3-q8_0",
    "tiny-llama-bf16",      "tiny-llama-f16",      "tiny-llama-f32",      "tiny-llama-q4_0",
    "tiny-llama-q4_k_m",    "tiny-llama-q5_k_m",   "tiny-llama-q6_k",     "tiny-llama-q8_0",
    "tiny-phi3-f32",        "tiny-phi3-q4_k_m",    "tiny-phi3-q8_0",      "tiny-qwen2-f16",
    "tiny-qwen2-q4_k_m",    "tiny-qwen2-q8_0",     "tiny-qwen3-f32",      "tiny-qwen3-q4_k_m",
    "tiny-qwen3-q8_0",      "tiny-qwen3moe-f32",   "tiny-qwen3moe-q4_k_m", "tiny-qwen3moe-q8_0"};

// The embedding models' files (WordPiece): prompt_ids as an embedding tokenises them, [CLS] ... [SEP].
const char* const kEmbeddingReferences[] = {"tiny-bert-f16", "tiny-bert-f32", "tiny-bert-q8_0"};

// Opens `stem`'s model and reference outputs and checks every record: its prompt tokenises (with BOS
// or [CLS]/[SEP] as the vocabulary says, special text not parsed) to prompt_ids, then `more` checks the
// rest of the record.
void check_reference_records(const char* stem,
                             const std::function<void(const Tokenizer&, const nlohmann::json&)>& more = {}) {
  const std::string path = test::reference_dir() + "/out/" + stem + ".jsonl";
  const std::string model = model_path_for(stem);
  if (!fs::exists(model)) {
    ADD_FAILURE() << "no model file for " << path << " (looked for " << model << ")";
    return;
  }
  const auto file = gguf::File::open(model);
  const auto tok = Tokenizer::from_gguf(*file);
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const std::string prompt = j.at("prompt");
    EXPECT_EQ(tok->encode(prompt, {.add_special = true, .parse_special = false}),
              j.at("prompt_ids").get<std::vector<TokenId>>())
        << stem << ": [" << prompt << "]";
    if (more) more(*tok, j);
    ++lines;
  }
  EXPECT_GT(lines, 0) << path;
}

TEST(ReferencePrompts, PromptIdsAndGreedyTextMatch) {
  INFER_REQUIRE_DIR(test::reference_dir() + "/out");
  for (const char* stem : kGenerativeReferences) {
    check_reference_records(stem, [stem](const Tokenizer& tok, const nlohmann::json& j) {
      std::string text;
      for (TokenId id : j.at("greedy_ids").get<std::vector<TokenId>>()) text += tok.token_to_piece(id);
      const std::string prompt = j.at("prompt");
      if (j.contains("greedy_bytes_hex"))
        EXPECT_EQ(hex(text), j.at("greedy_bytes_hex").get<std::string>()) << stem << ": [" << prompt << "]";
      else
        EXPECT_EQ(text, j.at("greedy_text").get<std::string>()) << stem << ": [" << prompt << "]";
    });
  }
}

TEST(ReferencePrompts, EmbeddingPromptIdsMatch) {
  INFER_REQUIRE_DIR(test::reference_dir() + "/out");
  for (const char* stem : kEmbeddingReferences) check_reference_records(stem);
}

}  // namespace
}  // namespace infer::tokenizer
