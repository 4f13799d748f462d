// Vector-set throughput and recall: builds a set (Q8, M 16, build EF 200 unless overridden), then measures
// VSIM-style searches at several EF values with recall@10 over the queries, against the set's own exact
// scan (TRUTH, on the stored Q8 vectors: `recall_at_10`) and against the exact float neighbours
// (`recall_float`), and the exact scan's own rate (BM_VsimTruth).
// Datasets (INFER_BENCH_DATASET):
//   gaussian   (default) 100,000 random 256-d Gaussian vectors and 200 random queries: HNSW's worst case
//   clustered  100,000 384-d vectors with the structure of real embeddings (clustered_embeddings.h) and 500
//              queries from the same distribution
// Environment: INFER_BENCH_VECTORS, INFER_BENCH_DIM, INFER_BENCH_QUERIES, INFER_BENCH_M, INFER_BENCH_BUILD_EF,
// INFER_BENCH_QUANT (q8, f32, bin). INFER_BENCH_WRITE=PREFIX writes the dataset as raw little-endian
// float32 rows to PREFIX.data and PREFIX.queries and exits (scripts/vector_bench.sh sends the same vectors
// through Redis and to hnswlib).
//   build-*/bench/bench_vector --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "clustered_embeddings.h"
#include "vector/vector_set.h"

namespace {

using infer::vector::SearchOptions;
using infer::vector::VectorSet;

size_t env_or(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

std::string env_str(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

infer::vector::Quant quant_from_env() {
  const std::string q = env_str("INFER_BENCH_QUANT", "q8");
  if (q == "f32") return infer::vector::Quant::F32;
  if (q == "bin") return infer::vector::Quant::Bin;
  return infer::vector::Quant::Q8;
}

void write_rows(const std::string& path, const std::vector<float>& rows) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(rows.data(), sizeof(float), rows.size(), f) != rows.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
}

struct Fixture {
  bool clustered = env_str("INFER_BENCH_DATASET", "gaussian") == "clustered";
  size_t n = env_or("INFER_BENCH_VECTORS", 100000);
  size_t dim = env_or("INFER_BENCH_DIM", clustered ? 384 : 256);
  size_t n_queries = env_or("INFER_BENCH_QUERIES", clustered ? 500 : 200);
  std::unique_ptr<VectorSet> set;
  std::vector<std::vector<float>> queries;
  std::vector<std::set<std::string>> truth;        // the set's exact scan (TRUTH)
  std::vector<std::set<std::string>> float_truth;  // exact float neighbours
  double add_seconds = 0;

  Fixture() {
    std::vector<float> data, query_rows;
    if (clustered) {
      const infer::bench::ClusteredEmbeddings gen({.dim = dim});
      data = gen.draw(n, 0);
      query_rows = gen.draw(n_queries, 1);
    } else {
      std::mt19937 rng(42);
      std::normal_distribution<float> nd;
      data.resize(n * dim);
      for (auto& x : data) x = nd(rng);
      query_rows.resize(n_queries * dim);
      for (auto& x : query_rows) x = nd(rng);
    }
    if (const std::string prefix = env_str("INFER_BENCH_WRITE", ""); !prefix.empty()) {
      write_rows(prefix + ".data", data);
      write_rows(prefix + ".queries", query_rows);
      std::exit(0);
    }
    for (size_t q = 0; q < n_queries; ++q) queries.emplace_back(&query_rows[q * dim], &query_rows[(q + 1) * dim]);
    set = std::make_unique<VectorSet>(infer::vector::SetConfig{
        .dim = static_cast<uint32_t>(dim),
        .quant = quant_from_env(),
        .m = static_cast<uint32_t>(env_or("INFER_BENCH_M", 16)),
        .ef_construction = static_cast<uint32_t>(env_or("INFER_BENCH_BUILD_EF", 200))});
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i)
      set->add("e" + std::to_string(i), std::vector<float>(&data[i * dim], &data[(i + 1) * dim]));
    add_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    SearchOptions exact{.count = 10, .truth = true};
    for (const auto& q : queries) {
      auto& t = truth.emplace_back();
      for (const auto& h : set->search(q, exact)) t.insert(*h.name);
      float_truth.push_back(exact_float_neighbours(data, q));
    }
  }

  std::set<std::string> exact_float_neighbours(const std::vector<float>& data, const std::vector<float>& q) const {
    // Cosine on the vectors as given (unit length for `clustered`; normalised here for `gaussian`).
    std::vector<std::pair<float, size_t>> scored(n);
    double qn = 0;
    for (float x : q) qn += double(x) * x;
    for (size_t i = 0; i < n; ++i) {
      const float* v = &data[i * dim];
      float dot = 0, vn = 0;
      for (size_t j = 0; j < dim; ++j) {
        dot += v[j] * q[j];
        vn += v[j] * v[j];
      }
      scored[i] = {-dot / std::sqrt(vn * float(qn)), i};
    }
    std::partial_sort(scored.begin(), scored.begin() + 10, scored.end());
    std::set<std::string> out;
    for (size_t i = 0; i < 10; ++i) out.insert("e" + std::to_string(scored[i].second));
    return out;
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_VaddBuild(benchmark::State& state) {
  Fixture& f = fixture();  // built once, timed inside
  for (auto _ : state) benchmark::DoNotOptimize(f.set->size());
  state.counters["vectors"] = static_cast<double>(f.n);
  state.counters["dim"] = static_cast<double>(f.dim);
  state.counters["vadd_per_s"] = static_cast<double>(f.n) / f.add_seconds;
  state.counters["build_s"] = f.add_seconds;
  state.counters["mem_MiB"] = static_cast<double>(f.set->memory_bytes()) / (1 << 20);
}
BENCHMARK(BM_VaddBuild)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_Vsim(benchmark::State& state) {
  Fixture& f = fixture();
  SearchOptions opt{.count = 10, .ef = static_cast<size_t>(state.range(0))};
  size_t found = 0, found_float = 0;
  for (size_t q = 0; q < f.queries.size(); ++q)
    for (const auto& h : f.set->search(f.queries[q], opt)) {
      found += f.truth[q].count(*h.name);
      found_float += f.float_truth[q].count(*h.name);
    }
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.set->search(f.queries[i++ % f.queries.size()], opt));
  }
  const double asked = static_cast<double>(f.queries.size() * 10);
  state.counters["recall_at_10"] = static_cast<double>(found) / asked;
  state.counters["recall_float"] = static_cast<double>(found_float) / asked;
  state.counters["vsim_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Vsim)->Arg(10)->Arg(20)->Arg(30)->Arg(40)->Arg(60)->Arg(80)->Arg(100)->Arg(200)->Arg(400)->Arg(800)->Arg(1600)
    ->Unit(benchmark::kMicrosecond);

void BM_VsimTruth(benchmark::State& state) {
  Fixture& f = fixture();
  SearchOptions exact{.count = 10, .truth = true};
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(f.set->search(f.queries[i++ % f.queries.size()], exact));
  state.counters["vsim_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_VsimTruth)->Unit(benchmark::kMillisecond);

}  // namespace
