// Reads llama.cpp-format tokenizer test vectors (shared/tokenizer-vectors/README.md): X.gguf.inp holds
// cases separated by "\n__ggml_vocab_test__\n", X.gguf.out one line of ids per case.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace infer::test {

struct VectorCase {
  std::string text;
  std::vector<tokenizer::TokenId> expected;
};

std::string read_file(const std::string& path);
// Throws std::runtime_error when the files are unreadable or their case counts differ.
std::vector<VectorCase> read_vector_cases(const std::string& inp_path, const std::string& out_path);
// The vocab files (*.gguf) of `dir` that the tokenizer tests cover, by name; empty when the dir is missing.
std::vector<std::string> vocab_files(const std::string& dir);

}  // namespace infer::test
