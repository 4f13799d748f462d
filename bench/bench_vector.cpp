// Vector-set throughput and recall: builds a set of random vectors (default 100,000 × 256-d, Q8, M 16,
// EF 200; INFER_BENCH_VECTORS / INFER_BENCH_DIM override), then measures VSIM-style searches at several
// EF values with recall@10 against the exact scan (TRUTH) over 200 random queries.
//   build-*/bench/bench_vector --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "vector/vector_set.h"

namespace {

using infer::vector::SearchOptions;
using infer::vector::VectorSet;

size_t env_or(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

struct Fixture {
  size_t n = env_or("INFER_BENCH_VECTORS", 100000);
  size_t dim = env_or("INFER_BENCH_DIM", 256);
  std::unique_ptr<VectorSet> set;
  std::vector<std::vector<float>> queries;
  double add_seconds = 0;

  Fixture() {
    std::mt19937 rng(42);
    std::normal_distribution<float> nd;
    auto random_vec = [&] {
      std::vector<float> v(dim);
      for (auto& x : v) x = nd(rng);
      return v;
    };
    set = std::make_unique<VectorSet>(infer::vector::SetConfig{.dim = static_cast<uint32_t>(dim)});
    std::vector<std::vector<float>> data(n);
    for (auto& v : data) v = random_vec();
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i) set->add("e" + std::to_string(i), data[i]);
    add_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int q = 0; q < 200; ++q) queries.push_back(random_vec());
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
  SearchOptions exact{.count = 10, .truth = true};
  size_t found = 0;
  for (const auto& q : f.queries) {
    std::set<const std::string*> truth;
    for (const auto& h : f.set->search(q, exact)) truth.insert(h.name);
    for (const auto& h : f.set->search(q, opt)) found += truth.count(h.name);
  }
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.set->search(f.queries[i++ % f.queries.size()], opt));
  }
  state.counters["recall_at_10"] = static_cast<double>(found) / static_cast<double>(f.queries.size() * 10);
  state.counters["vsim_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Vsim)->Arg(100)->Arg(200)->Arg(400)->Arg(800)->Arg(1600)->Unit(benchmark::kMicrosecond);

void BM_VsimTruth(benchmark::State& state) {
  Fixture& f = fixture();
  SearchOptions exact{.count = 10, .truth = true};
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(f.set->search(f.queries[i++ % f.queries.size()], exact));
  state.counters["vsim_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_VsimTruth)->Unit(benchmark::kMillisecond);

}  // namespace
