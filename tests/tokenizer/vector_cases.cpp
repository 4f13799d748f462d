#include "vector_cases.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace infer::test {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<VectorCase> read_vector_cases(const std::string& inp_path, const std::string& out_path) {
  const std::string inp = read_file(inp_path);
  const std::string out = read_file(out_path);
  static const std::string kMarker = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t at = inp.find(kMarker, pos);
    if (at == std::string::npos) {
      cases.push_back({inp.substr(pos), {}});
      break;
    }
    cases.push_back({inp.substr(pos, at - pos), {}});
    pos = at + kMarker.size();
  }
  std::vector<std::string> lines;
  std::istringstream lines_in(out);
  for (std::string line; std::getline(lines_in, line);) lines.push_back(line);
  if (lines.size() != cases.size())
    throw std::runtime_error(out_path + ": " + std::to_string(lines.size()) + " lines for " +
                             std::to_string(cases.size()) + " cases in " + inp_path);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::istringstream ids(lines[i]);
    for (long id; ids >> id;) cases[i].expected.push_back(static_cast<tokenizer::TokenId>(id));
  }
  return cases;
}

std::vector<std::string> vocab_files(const std::string& dir) {
  // By name: a vocab added to the folder is not covered until its tokenizer exists and it is listed.
  static const char* const kVocabFiles[] = {
      "ggml-vocab-bert-bge.gguf",  "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-gpt-2.gguf",
      "ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf",      "ggml-vocab-phi-3.gguf",
      "ggml-vocab-qwen2.gguf",     "ggml-vocab-smollm.gguf",         "ggml-vocab-starcoder.gguf"};
  std::vector<std::string> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return files;
  for (const char* name : kVocabFiles) files.push_back(dir + "/" + name);
  return files;
}

}  // namespace infer::test
