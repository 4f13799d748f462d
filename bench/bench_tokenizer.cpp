// Tokenizer throughput (tokens/s) on a large mixed-script text: the shared vector inputs (English,
// code, digits, Cyrillic, CJK, emoji) repeated to about 400 KB, per vocabulary family.
// Data: $INFER_VECTORS_DIR, default <repo>/../shared/tokenizer-vectors.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gguf/file.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string vectors_dir() {
  if (const char* v = std::getenv("INFER_VECTORS_DIR"); v && *v) return v;
  return (std::filesystem::path(__FILE__).parent_path() / "../../shared/tokenizer-vectors").string();
}

std::string large_text(const std::string& inp_path) {
  std::ifstream in(inp_path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string cases = ss.str();
  // Drop the case markers so the text reads as one document.
  for (size_t at; (at = cases.find("__ggml_vocab_test__")) != std::string::npos;) cases.erase(at, 19);
  std::string text;
  while (!cases.empty() && text.size() < 400 * 1024) text += cases;
  return text;
}

void BM_Encode(benchmark::State& state, const char* vocab_name) {
  const std::string path = vectors_dir() + "/ggml-vocab-" + vocab_name + ".gguf";
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("missing " + path).c_str());
    return;
  }
  const auto file = infer::gguf::File::open(path);
  const auto tok = infer::tokenizer::Tokenizer::from_gguf(*file);
  const std::string text = large_text(path + ".inp");
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text, {.add_special = false, .parse_special = true});
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(n_tokens) * state.iterations(),
                                                  benchmark::Counter::kIsRate);
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.SetBytesProcessed(static_cast<int64_t>(text.size()) * state.iterations());
}

void BM_Decode(benchmark::State& state, const char* vocab_name) {
  const std::string path = vectors_dir() + "/ggml-vocab-" + vocab_name + ".gguf";
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("missing " + path).c_str());
    return;
  }
  const auto file = infer::gguf::File::open(path);
  const auto tok = infer::tokenizer::Tokenizer::from_gguf(*file);
  const auto ids = tok->encode(large_text(path + ".inp"));
  for (auto _ : state) benchmark::DoNotOptimize(tok->decode(ids));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(ids.size()) * state.iterations(),
                                                  benchmark::Counter::kIsRate);
}

// Vocabulary load: GGUF metadata parse plus the tokenizer's tables (what a model load pays).
void BM_Load(benchmark::State& state, const char* vocab_name) {
  const std::string path = vectors_dir() + "/ggml-vocab-" + vocab_name + ".gguf";
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("missing " + path).c_str());
    return;
  }
  for (auto _ : state) {
    const auto file = infer::gguf::File::open(path);
    benchmark::DoNotOptimize(infer::tokenizer::Tokenizer::from_gguf(*file));
  }
}

BENCHMARK_CAPTURE(BM_Load, llama_spm, "llama-spm")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Load, llama_bpe, "llama-bpe")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama_spm, "llama-spm")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, gpt_2, "gpt-2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, qwen2, "qwen2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama_bpe, "llama-bpe")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, bert_bge, "bert-bge")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, llama_spm, "llama-spm")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, qwen2, "qwen2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, bert_bge, "bert-bge")->Unit(benchmark::kMillisecond);

}  // namespace
