// Forward-pass benchmarks on stories260K (fits in cache: measures per-step overhead, the figure to
// compare with llama.cpp's ~4,100 tok/s greedy on 1 thread) and on a tiny-llama reference model.
// Data dir: INFER_MODELS_DIR (default ../shared/models relative to the source tree).
#include <benchmark/benchmark.h>
#include <sys/mman.h>


#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops/ops.h"
#include "kernels/runtime/thread_pool.h"
#include "model/kv_pool.h"
#include "model/model.h"

namespace {

std::string shared_dir(const char* env, const char* sub) {
  if (const char* v = std::getenv(env); v && *v) return v;
  // bench/ sits in the source tree; the shared data is next to the repository.
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / ".." / "shared" / sub).string();
}

// Greedy decode of n_tokens after BOS, one row per step: tokens/s is items/s.
void greedy(benchmark::State& state, const std::string& path) {
  const int threads = int(state.range(0));
  const auto model = infer::model::Model::load(path);
  const auto& hp = model->hparams();
  const int n_tokens = 256, page_tokens = 16;
  infer::kernels::ThreadPool pool(threads);
  infer::model::KvPool kv(hp, page_tokens, n_tokens / page_tokens + 1);
  infer::model::Forward fwd(*model, pool, 1);
  std::vector<int32_t> pages(size_t(n_tokens / page_tokens + 1));
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = int32_t(i);
  std::vector<float> logits(size_t(hp.n_vocab));
  infer::model::Batch batch;
  batch.seqs = {{pages.data(), int(pages.size())}};
  batch.rows = {{0, 0, 1, true}};
  for (auto _ : state) {
    int32_t token = 1;
    for (int pos = 0; pos < n_tokens; ++pos) {
      batch.rows[0].pos = pos;
      batch.rows[0].token = token;
      fwd.run(batch, kv, logits.data());
      token = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    benchmark::DoNotOptimize(token);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n_tokens);
}

// Prefill of n rows in one batch.
void prefill(benchmark::State& state, const std::string& path) {
  const int threads = int(state.range(0)), n = int(state.range(1));
  const auto model = infer::model::Model::load(path);
  const auto& hp = model->hparams();
  infer::kernels::ThreadPool pool(threads);
  infer::model::KvPool kv(hp, 16, n / 16 + 1);
  infer::model::Forward fwd(*model, pool, n);
  std::vector<int32_t> pages(size_t(n / 16 + 1));
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = int32_t(i);
  std::vector<float> logits(size_t(hp.n_vocab));
  infer::model::Batch batch;
  batch.seqs = {{pages.data(), int(pages.size())}};
  for (int i = 0; i < n; ++i) batch.rows.push_back({0, i, int32_t(3 + (i * 37) % (hp.n_vocab - 3)), i == n - 1});
  for (auto _ : state) fwd.run(batch, kv, logits.data());
  state.SetItemsProcessed(int64_t(state.iterations()) * n);
}

void BM_Stories260KGreedy(benchmark::State& s) { greedy(s, shared_dir("INFER_MODELS_DIR", "models") + "/stories260K.gguf"); }
void BM_Stories260KPrefill(benchmark::State& s) { prefill(s, shared_dir("INFER_MODELS_DIR", "models") + "/stories260K.gguf"); }
void BM_TinyLlamaQ8Greedy(benchmark::State& s) {
  greedy(s, shared_dir("INFER_REFERENCE_DIR", "reference") + "/models/tiny-llama-q8_0.gguf");
}
void BM_TinyLlamaQ8Prefill(benchmark::State& s) {
  prefill(s, shared_dir("INFER_REFERENCE_DIR", "reference") + "/models/tiny-llama-q8_0.gguf");
}

}  // namespace

BENCHMARK(BM_Stories260KGreedy)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Stories260KPrefill)->Args({1, 256})->Args({2, 256})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TinyLlamaQ8Greedy)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TinyLlamaQ8Prefill)->Args({1, 256})->Args({2, 256})->Unit(benchmark::kMillisecond)->UseRealTime();

namespace {

// One decode row's attention at the Qwen3-0.6B shape (16 heads, 8 KV heads, head_dim 128) over
// range(0) cached keys: the attention share of a decode step at that context length.
void BM_AttentionRowQwen3Shape(benchmark::State& state) {
  const int n_keys = int(state.range(0)), n_head = 16, n_kv = 8, hd = 128, kv_dim = n_kv * hd, T = 16;
  const int n_pages = (n_keys + T - 1) / T;
  std::vector<uint16_t> mem(size_t(n_pages) * 2 * T * kv_dim, 0x3c00);  // 1.0 in F16
  std::vector<int32_t> table(static_cast<size_t>(n_pages));
  for (int i = 0; i < n_pages; ++i) table[size_t(i)] = n_pages - 1 - i;
  const infer::kernels::PagedKv kv{mem.data(), mem.data() + T * kv_dim, int64_t(2) * T * kv_dim, T, table.data(),
                                   kv_dim};
  std::vector<float> q(size_t(n_head * hd), 0.01f), out(q.size()), scratch(size_t(infer::kernels::attention_rows_scratch(1, n_head / n_kv, n_keys)));
  for (auto _ : state) {
    infer::kernels::attention_row(q.data(), kv, n_keys, n_head, n_kv, hd, 0.088f, out.data(), scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n_keys * n_head * hd * 2);  // multiply-adds
}

// One decode step's attention for range(1) sequences of range(0) cached keys each, over all 28 layers
// of Qwen3-0.6B, every sequence and layer in its own pages: unlike the row benchmark above, the keys
// come from memory (about 100 MB for 8 sequences of 110 keys), as in serving; one sequence of 96 keys
// (under 6 MB) stays in L3, which shows the kernel's compute alone. KV rows are F16, Q8_0 when
// range(2) is 1, Q4_0 when it is 2.
void BM_AttentionStepQwen3Shape(benchmark::State& state) {
  const int n_keys = int(state.range(0)), n_seqs = int(state.range(1)), n_layer = 28;
  const auto type = state.range(2) == 1   ? infer::kernels::KvType::Q8_0
                    : state.range(2) == 2 ? infer::kernels::KvType::Q4_0
                                          : infer::kernels::KvType::F16;
  const int n_head = 16, n_kv = 8, hd = 128, T = 16;
  const int kv_dim = int(infer::kernels::kv_row_halves(type, n_kv * hd));  // 2-byte units of a row
  const int pages_per_seq = (n_keys + T - 1) / T, n_pages = pages_per_seq * n_seqs;
  const int64_t page_stride = int64_t(n_layer) * 2 * T * kv_dim + 160;
  // The engine's pool (model::KvPool) is on transparent huge pages; so is this.
  const size_t huge = size_t(2) << 20, bytes = (size_t(n_pages) * size_t(page_stride) * 2 + huge - 1) / huge * huge;
  std::unique_ptr<uint16_t, decltype(&std::free)> mem(static_cast<uint16_t*>(std::aligned_alloc(huge, bytes)), &std::free);
  ::madvise(mem.get(), bytes, MADV_HUGEPAGE);
  std::fill_n(mem.get(), bytes / 2, uint16_t(0x3c00));  // 1.0 in F16
  std::vector<int32_t> table(static_cast<size_t>(n_pages));
  for (int i = 0; i < n_pages; ++i) table[size_t(i)] = i;
  std::vector<float> q(size_t(n_head * hd), 0.01f), out(q.size()), scratch(size_t(infer::kernels::attention_rows_scratch(1, n_head / n_kv, n_keys)));
  for (auto _ : state) {
    for (int l = 0; l < n_layer; ++l) {
      const uint16_t* k = mem.get() + int64_t(l) * 2 * T * kv_dim;
      for (int s = 0; s < n_seqs; ++s) {
        infer::kernels::PagedKv kv{k, k + T * kv_dim, page_stride, T, &table[size_t(s * pages_per_seq)], kv_dim};
        kv.type = type;
        infer::kernels::attention_row(q.data(), kv, n_keys, n_head, n_kv, hd, 0.088f, out.data(), scratch.data());
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n_seqs * n_layer * n_keys * kv_dim * 2 * 2);
  state.SetLabel(infer::kernels::kv_type_name(type));
}


// The step above with the pages laid out head-major (each KV head's K rows, then V rows, contiguous: a
// head's keys 256 B apart instead of a whole row's 2 KiB): what a head-major KV layout would gain
// (docs/performance.md, "serving 8 sequences against 1").
void BM_AttentionStepHeadMajor(benchmark::State& state) {
  const int n_keys = int(state.range(0)), n_seqs = int(state.range(1)), n_layer = 28;
  const int n_head = 16, n_kv = 8, hd = 128, T = 16;
  const int pages_per_seq = (n_keys + T - 1) / T, n_pages = pages_per_seq * n_seqs;
  // page: per layer, per kv head: T K rows of hd then T V rows
  const int64_t head_block = int64_t(2) * T * hd;
  const int64_t page_stride = int64_t(n_layer) * n_kv * head_block + 160;
  const size_t huge = size_t(2) << 20, bytes = (size_t(n_pages) * size_t(page_stride) * 2 + huge - 1) / huge * huge;
  std::unique_ptr<uint16_t, decltype(&std::free)> mem(static_cast<uint16_t*>(std::aligned_alloc(huge, bytes)), &std::free);
  ::madvise(mem.get(), bytes, MADV_HUGEPAGE);
  std::fill_n(mem.get(), bytes / 2, uint16_t(0x3c00));
  std::vector<int32_t> table(static_cast<size_t>(n_pages));
  for (int i = 0; i < n_pages; ++i) table[size_t(i)] = i;
  std::vector<float> q(size_t(n_head * hd), 0.01f), out(q.size()), scratch(size_t(infer::kernels::attention_rows_scratch(1, n_head / n_kv, n_keys)));
  for (auto _ : state) {
    for (int l = 0; l < n_layer; ++l) {
      for (int s = 0; s < n_seqs; ++s) {
        for (int g = 0; g < n_kv; ++g) {
          const uint16_t* k = mem.get() + (int64_t(l) * n_kv + g) * head_block;
          const infer::kernels::PagedKv kv{k, k + T * hd, page_stride, T, &table[size_t(s * pages_per_seq)], hd};
          infer::kernels::attention_row(q.data() + g * 2 * hd, kv, n_keys, 2, 1, hd, 0.088f, out.data() + g * 2 * hd, scratch.data());
        }
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n_seqs * n_layer * n_keys * n_kv * hd * 2 * 2);
}

// A prefill's attention for one KV head over range(0) prompt rows taken range(1) rows at a time
// (kernels::attention_rows), at range(2) query heads per KV head and head_dim range(3) (Qwen3-0.6B is
// 2 × 128, llama-3.2-1b 4 × 64, bge-small 1 × 32, bge-base 1 × 64), causal if range(4), else
// whole-sequence (bert). Blocks of one row are the per-row kernel.
void BM_AttentionRowsPrefill(benchmark::State& state) {
  const int n_rows = int(state.range(0)), block = int(state.range(1)), n_gqa = int(state.range(2));
  const int hd = int(state.range(3)), kv_dim = 8 * hd, T = 16;
  const bool causal = state.range(4) != 0;
  const int n_pages = (n_rows + T - 1) / T;
  std::vector<uint16_t> mem(size_t(n_pages) * 2 * T * kv_dim);
  for (size_t i = 0; i < mem.size(); ++i) mem[i] = infer::kernels::f32_to_f16(float(int(i % 17) - 8) * 0.01f);
  std::vector<int32_t> table(static_cast<size_t>(n_pages));
  for (int i = 0; i < n_pages; ++i) table[size_t(i)] = n_pages - 1 - i;
  const infer::kernels::PagedKv kv{mem.data(), mem.data() + T * kv_dim, int64_t(2) * T * kv_dim, T, table.data(),
                                   kv_dim};
  const int64_t q_stride = int64_t(n_gqa) * hd;
  std::vector<float> q(size_t(n_rows * q_stride), 0.01f), out(q.size());
  std::vector<float> scratch(size_t(infer::kernels::attention_rows_scratch(block, n_gqa, n_rows)));
  std::vector<int> begin(static_cast<size_t>(block), 0), end(static_cast<size_t>(block));
  for (auto _ : state) {
    for (int r0 = 0; r0 < n_rows; r0 += block) {
      const int rows = std::min(block, n_rows - r0);
      for (int i = 0; i < rows; ++i) end[size_t(i)] = causal ? r0 + i + 1 : n_rows;
      const infer::kernels::AttentionRows a{&q[size_t(r0 * q_stride)], q_stride, &out[size_t(r0 * q_stride)],
                                            q_stride, begin.data(), end.data(), rows};
      infer::kernels::attention_rows(a, kv, n_gqa, hd, 0.088f, scratch.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  const int64_t keys = causal ? int64_t(n_rows) * (n_rows + 1) / 2 : int64_t(n_rows) * n_rows;
  state.SetItemsProcessed(int64_t(state.iterations()) * keys * n_gqa * hd * 2);  // multiply-adds
}

}  // namespace

BENCHMARK(BM_AttentionRowsPrefill)
    ->Args({512, 1, 2, 128, 1})->Args({512, 6, 2, 128, 1})->Args({512, 12, 2, 128, 1})->Args({512, 24, 2, 128, 1})
    ->Args({2048, 1, 4, 64, 1})->Args({2048, 6, 4, 64, 1})  // llama-3.2-1b: 4 × 64
    ->Args({128, 1, 1, 32, 0})->Args({128, 12, 1, 32, 0})->Args({128, 24, 1, 32, 0})->Args({128, 24, 1, 64, 0});
BENCHMARK(BM_AttentionRowQwen3Shape)->Arg(256)->Arg(2048);
BENCHMARK(BM_AttentionStepQwen3Shape)
    ->Args({96, 1, 0})->Args({96, 8, 0})->Args({192, 8, 0})->Args({1100, 8, 0})->Args({2048, 1, 0})
    ->Args({96, 1, 1})->Args({192, 8, 1})->Args({1100, 8, 1})
    ->Args({96, 1, 2})->Args({192, 8, 2})->Args({1100, 8, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionStepHeadMajor)->Args({192, 8})->Args({1100, 8})->Unit(benchmark::kMillisecond);
