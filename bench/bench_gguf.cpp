// Opening a GGUF file costs O(metadata), not O(file size): open time for the small real model, a
// metadata-heavy vocabulary file and a 2 GiB file (written once, sparse, by gguf::Writer).
#include <benchmark/benchmark.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gguf/file.h"
#include "gguf/writer.h"

namespace {

using namespace infer::gguf;

std::string shared_dir(const char* env, const char* sub) {
  if (const char* v = std::getenv(env); v && *v) return v;
  // bench/ sits in the source tree; the shared data is next to the repository.
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / ".." / "shared" / sub).string();
}

// A llama-7B-shaped file: 32 blocks × 7 Q4_K 4096×4096 matrices (2.1 GB) plus norms and a 32k vocab.
// Tensor data are holes, so writing it takes seconds and almost no disk.
std::string large_file() {
  static const std::string path = [] {
    std::string p = (std::filesystem::temp_directory_path() / "infer_bench_gguf_2g.gguf").string();
    if (std::filesystem::exists(p) && std::filesystem::file_size(p) > (uint64_t{2} << 30)) return p;
    Writer w;
    w.add_string("general.architecture", "llama");
    w.add_uint32("llama.block_count", 32);
    std::vector<std::string> tokens;
    for (int i = 0; i < 32000; ++i) tokens.push_back("tok" + std::to_string(i));
    w.add_array("tokenizer.ggml.tokens", tokens);
    auto zeros = [](uint64_t n) { return [n](TensorSink& s) { s.write_zeros(n); }; };
    const std::vector<int64_t> mat = {4096, 4096}, norm = {4096};
    for (int l = 0; l < 32; ++l) {
      std::string b = "blk." + std::to_string(l) + ".";
      for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
        w.add_tensor(b + n + ".weight", TensorType::Q4_K, mat, zeros(Writer::tensor_bytes(TensorType::Q4_K, mat)));
      }
      for (const char* n : {"attn_norm", "ffn_norm"}) {
        w.add_tensor(b + n + ".weight", TensorType::F32, norm, zeros(Writer::tensor_bytes(TensorType::F32, norm)));
      }
    }
    w.write(p);
    return p;
  }();
  return path;
}

void open_file(benchmark::State& state, const std::string& path) {
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("missing " + path).c_str());
    return;
  }
  size_t n_tensors = 0;
  for (auto _ : state) {
    auto f = File::open(path);
    n_tensors = f->tensors().size();
    benchmark::DoNotOptimize(f.get());
  }
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  state.counters["tensors"] = static_cast<double>(n_tensors);
}

void BM_OpenStories260K(benchmark::State& state) {
  open_file(state, shared_dir("INFER_MODELS_DIR", "models") + "/stories260K.gguf");
}
BENCHMARK(BM_OpenStories260K)->Unit(benchmark::kMicrosecond);

void BM_OpenGpt2Vocab(benchmark::State& state) {  // 50k tokens + 50k merges: metadata-bound
  open_file(state, shared_dir("INFER_VECTORS_DIR", "tokenizer-vectors") + "/ggml-vocab-gpt-2.gguf");
}
BENCHMARK(BM_OpenGpt2Vocab)->Unit(benchmark::kMillisecond);

void BM_OpenLarge2GiB(benchmark::State& state) { open_file(state, large_file()); }
BENCHMARK(BM_OpenLarge2GiB)->Unit(benchmark::kMillisecond);

}  // namespace
