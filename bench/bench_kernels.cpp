// Matmul and bandwidth micro-benchmarks (Google Benchmark).
//   decode (1 row): GB/s of weight bytes read; rotates over copies of the matrix that together
//     exceed the caches, so the figure is memory bandwidth, not cache bandwidth.
//   decode hot: the same from L2 on one thread (CPU time): the kernel's own speed.
//   prefill (64..512 rows): GFLOP/s (2·n_in·n_out·rows per call).
//   Qwen3-0.6B decode step: every matmul of one token of the real shape (28 layers + tied output),
//     GB/s, next to the bandwidth probe (probe_GB/s) measured in the same process; the same for 1, 4
//     and 8 sequences at once, against the VPDPBUSD peak (BM_DecodeQwen3Rows).
// Run: build/bench/bench_kernels --benchmark_filter=Decode   (compare ratios from one run only)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/runtime/bandwidth.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/quant/interleave.h"
#include "kernels/matmul/matmul.h"
#include "kernels/quant/quant.h"
#include "kernels/matmul/row_kernels.h"
#include "kernels/runtime/thread_pool.h"

namespace {

using infer::kernels::MatmulScratch;
using infer::kernels::TensorType;
using infer::kernels::ThreadPool;
using infer::kernels::WeightMatrix;
namespace k = infer::kernels;

constexpr size_t kColdBytes = size_t{768} << 20;  // above this machine's and the target's L3

const char* name_of(TensorType t) {
  switch (t) {
    case TensorType::F16: return "F16";
    case TensorType::Q8_0: return "Q8_0";
    case TensorType::Q4_0: return "Q4_0";
    case TensorType::Q5_0: return "Q5_0";
    case TensorType::Q5_1: return "Q5_1";
    case TensorType::Q4_K: return "Q4_K";
    case TensorType::Q5_K: return "Q5_K";
    case TensorType::Q6_K: return "Q6_K";
    default: return "other";
  }
}

// n_rows rows of valid random blocks: 64 quantised rows repeated (speed does not depend on values).
std::vector<uint8_t> weights(TensorType t, int64_t n_in, int64_t n_rows) {
  const uint64_t rb = k::quant_row_bytes(t, n_in);
  const int64_t tmpl_rows = std::min<int64_t>(64, n_rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 0.05f);
  std::vector<float> x(n_in);
  std::vector<uint8_t> w(rb * n_rows);
  for (int64_t r = 0; r < tmpl_rows; ++r) {
    for (auto& v : x) v = normal(rng);
    k::quantize_row(t, x.data(), w.data() + r * rb, n_in);
  }
  for (int64_t r = tmpl_rows; r < n_rows; r += tmpl_rows) {
    std::memcpy(w.data() + r * rb, w.data(), rb * std::min(tmpl_rows, n_rows - r));
  }
  return w;
}

std::vector<float> activations(int64_t n) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

double probe_gbs(int threads) {
  static double cached[8] = {};
  if (cached[threads] == 0) {
    ThreadPool pool(threads);
    cached[threads] = k::measure_read_bandwidth_gbs(pool, size_t{1} << 30, 5);
  }
  return cached[threads];
}

// Args: type id, n_in, n_out, threads.
void BM_MatmulDecode(benchmark::State& state) {
  const auto t = static_cast<TensorType>(state.range(0));
  const int64_t n_in = state.range(1), n_out = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const uint64_t matrix_bytes = k::quant_row_bytes(t, n_in) * n_out;
  const int64_t copies = std::max<int64_t>(1, static_cast<int64_t>(kColdBytes / matrix_bytes));
  const std::vector<uint8_t> w = weights(t, n_in, n_out * copies);
  const std::vector<float> x = activations(n_in);
  std::vector<float> y(n_out);
  ThreadPool pool(threads);
  MatmulScratch scratch;
  int64_t c = 0;
  for (auto _ : state) {
    const WeightMatrix m{t, w.data() + c * matrix_bytes, n_in, n_out, k::quant_row_bytes(t, n_in)};
    k::matmul(m, x.data(), 1, n_in, y.data(), n_out, pool, scratch);
    c = (c + 1) % copies;
  }
  benchmark::DoNotOptimize(y.data());
  state.SetLabel(name_of(t));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * matrix_bytes));
}

// One row against a 1024×1024 matrix that stays in L2, one thread: the kernel's own speed, which must
// be well above one core's share of memory bandwidth for decode to be bandwidth-bound. CPU time.
void BM_MatmulDecodeHot(benchmark::State& state) {
  const auto t = static_cast<TensorType>(state.range(0));
  const int64_t n = 1024;
  const std::vector<uint8_t> w = weights(t, n, n);
  const std::vector<float> x = activations(n);
  std::vector<float> y(n);
  ThreadPool pool(1);
  MatmulScratch scratch;
  const WeightMatrix m{t, w.data(), n, n, k::quant_row_bytes(t, n)};
  for (auto _ : state) k::matmul(m, x.data(), 1, n, y.data(), n, pool, scratch);
  state.SetLabel(name_of(t));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.size()));
}

// Args: type id, n_in, n_out, rows, threads.
// Times matmul of `rows` random activation rows with a random n_in × n_out matrix of type t.
// interleaved: the weights in the interleaved layout (interleave.h); skipped where it has no kernels.
void time_matmul(benchmark::State& state, TensorType t, int64_t n_in, int64_t n_out, int64_t rows, int threads,
                 bool interleaved = false) {
  if (interleaved && !k::interleaved_kernels_available(t)) {
    state.SkipWithError("no interleaved kernels on this CPU");
    return;
  }
  std::vector<uint8_t> w = weights(t, n_in, n_out);
  if (interleaved) k::interleave_rows(t, w.data(), n_in, n_out);
  const std::vector<float> x = activations(n_in * rows);
  std::vector<float> y(n_out * rows);
  ThreadPool pool(threads);
  MatmulScratch scratch;
  const WeightMatrix m{t, w.data(), n_in, n_out, k::quant_row_bytes(t, n_in), interleaved};
  for (auto _ : state) k::matmul(m, x.data(), rows, n_in, y.data(), n_out, pool, scratch);
  state.SetLabel(name_of(t));
}

void BM_MatmulPrefill(benchmark::State& state) {
  const auto t = static_cast<TensorType>(state.range(0));
  const int64_t n_in = state.range(1), n_out = state.range(2), rows = state.range(3);
  time_matmul(state, t, n_in, n_out, rows, static_cast<int>(state.range(4)), state.range(5) != 0);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n_in * n_out * rows * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// The matmuls of one Qwen3-0.6B decode token: 28 layers (q, k, v, output, gate, up, down) and the tied
// output. Q4_K_M files use Q6_K for the output and for attn_v/ffn_down on the use_more_bits layers
// (spec §9.3).
struct Qwen3Matmul {
  int64_t n_in, n_out;
  bool six_bit;
};
constexpr int64_t kQwen3Embd = 1024, kQwen3Ff = 3072, kQwen3Vocab = 151936;

std::vector<Qwen3Matmul> qwen3_matmuls() {
  constexpr int kLayers = 28;
  constexpr int64_t kQ = 2048, kKv = 1024;
  auto more_bits = [](int i) { return i < kLayers / 8 || i >= 7 * kLayers / 8 || (i - kLayers / 8) % 3 == 2; };
  std::vector<Qwen3Matmul> shapes;
  for (int i = 0; i < kLayers; ++i) {
    shapes.push_back({kQwen3Embd, kQ, false});
    shapes.push_back({kQwen3Embd, kKv, false});
    shapes.push_back({kQwen3Embd, kKv, more_bits(i)});
    shapes.push_back({kQ, kQwen3Embd, false});
    shapes.push_back({kQwen3Embd, kQwen3Ff, false});
    shapes.push_back({kQwen3Embd, kQwen3Ff, false});
    shapes.push_back({kQwen3Ff, kQwen3Embd, more_bits(i)});
  }
  shapes.push_back({kQwen3Embd, kQwen3Vocab, true});
  return shapes;
}

// The step's weights of a Q4_K_M (or Q8_0) file, in the layout the engine loads (interleaved where the
// CPU has those kernels) when `interleaved`.
struct Qwen3Weights {
  std::vector<std::vector<uint8_t>> store;
  std::vector<WeightMatrix> mats;
  uint64_t bytes = 0;
  Qwen3Weights(bool q4_k_m, bool interleaved) {
    for (const Qwen3Matmul& s : qwen3_matmuls()) {
      const TensorType t = !q4_k_m ? TensorType::Q8_0 : s.six_bit ? TensorType::Q6_K : TensorType::Q4_K;
      store.push_back(weights(t, s.n_in, s.n_out));
      const bool il = interleaved && k::interleaved_kernels_available(t);
      if (il) k::interleave_rows(t, store.back().data(), s.n_in, s.n_out);
      mats.push_back({t, store.back().data(), s.n_in, s.n_out, k::quant_row_bytes(t, s.n_in), il});
      bytes += store.back().size();
    }
  }
};

// One decode token of Qwen3-0.6B's matmuls. Arg 0: 0 = Q8_0 file, 1 = Q4_K_M file. Arg 1: threads.
void BM_DecodeQwen3Step(benchmark::State& state) {
  const bool q4_k_m = state.range(0) == 1;
  const int threads = static_cast<int>(state.range(1));
  const Qwen3Weights qw(q4_k_m, false);
  const std::vector<float> x = activations(kQwen3Ff);
  std::vector<float> y(kQwen3Vocab);
  ThreadPool pool(threads);
  MatmulScratch scratch;
  for (auto _ : state) {
    for (const WeightMatrix& m : qw.mats) k::matmul(m, x.data(), 1, m.n_in, y.data(), m.n_out, pool, scratch);
  }
  const double gbs = qw.bytes * static_cast<double>(state.iterations()) / 1e9;
  state.counters["GB/s"] = benchmark::Counter(gbs, benchmark::Counter::kIsRate);
  state.counters["MiB"] = static_cast<double>(qw.bytes) / (1 << 20);
  state.counters["probe_GB/s"] = probe_gbs(threads);
  state.SetLabel(q4_k_m ? "Q4_K_M" : "Q8_0");
}

// This machine's int8 multiply-add peak on `threads` cores (VPDPBUSD; 0 without AVX-512 VNNI): one
// core's, probed alone (run on both at once, a neighbour on a shared host halves it at times).
double vnni_peak_macs(int threads) {
  static const double per_core = k::use_avx512() ? k::avx512::vnni_macs_per_second() : 0;
  return per_core * threads;
}

// The matmuls of one Qwen3-0.6B Q4_K_M decode step for range(0) sequences at once (activation rows),
// on range(1) threads, over the weights in the engine's layout: what a serving step's matmuls cost at
// that batch. Counters: rows/s (the ratio of two batch sizes is the matmuls' share of serve-bench's
// 8-against-1), int8 GMAC/s, and of_peak: that rate over the cores' VPDPBUSD peak measured in the same
// process (a K-quant's scale steps cost about a fifth more multiply-add slots on top: docs/performance.md).
void BM_DecodeQwen3Rows(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), threads = static_cast<int>(state.range(1));
  const Qwen3Weights qw(true, true);
  double macs = 0;
  for (const WeightMatrix& m : qw.mats) macs += double(m.n_in) * double(m.n_out) * rows;
  const std::vector<float> x = activations(kQwen3Ff * rows);
  std::vector<float> y(static_cast<size_t>(kQwen3Vocab * rows));
  ThreadPool pool(threads);
  MatmulScratch scratch;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (const WeightMatrix& m : qw.mats) k::matmul(m, x.data(), rows, m.n_in, y.data(), m.n_out, pool, scratch);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double steps = static_cast<double>(state.iterations());
  state.counters["rows/s"] = steps * rows / seconds;
  state.counters["GMAC/s"] = steps * macs / seconds / 1e9;
  const double peak = vnni_peak_macs(threads);
  if (peak > 0) {
    state.counters["peak_GMAC/s"] = peak / 1e9;
    state.counters["of_peak"] = steps * macs / seconds / peak;
  }
  state.SetLabel("Q4_K_M");
}

void BM_ReadBandwidth(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  double gbs = 0;
  for (auto _ : state) gbs = k::measure_read_bandwidth_gbs(pool, size_t{1} << 30, 3);
  state.counters["GB/s"] = gbs;
}

void decode_args(benchmark::internal::Benchmark* b) {
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::Q5_K, TensorType::Q4_0,
                       TensorType::Q5_0, TensorType::Q5_1, TensorType::F16, TensorType::BF16}) {
    for (auto [n_in, n_out] : {std::pair<int64_t, int64_t>{1024, 3072}, {3072, 1024}, {1024, 151936}}) {
      for (int threads : {1, 2}) b->Args({static_cast<int64_t>(t), n_in, n_out, threads});
    }
  }
}

void prefill_args(benchmark::internal::Benchmark* b) {
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::Q5_K, TensorType::Q4_0,
                       TensorType::Q5_0, TensorType::Q5_1, TensorType::F16, TensorType::BF16, TensorType::F32}) {
    for (int64_t rows : {64, 512}) {
      for (int threads : {1, 2}) b->Args({static_cast<int64_t>(t), 1024, 3072, rows, threads, 0});
    }
  }
  // llama-3.2-1b's FFN (2048 wide, FFN 8192): rows longer than one k-block of the float tiles, and
  // transposed groups of the VNNI tile larger than L1
  for (TensorType t : {TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0}) {
    for (auto [n_in, n_out] : {std::pair<int64_t, int64_t>{2048, 8192}, {8192, 2048}}) {
      b->Args({static_cast<int64_t>(t), n_in, n_out, 512, 1, 0});
    }
  }
  // the K-quants in the interleaved layout, as a loaded model holds them on AVX-512 VNNI CPUs
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    for (auto [n_in, n_out] : {std::pair<int64_t, int64_t>{2048, 8192}, {8192, 2048}}) {
      b->Args({static_cast<int64_t>(t), n_in, n_out, 512, 1, 1});
    }
  }
  // bge-small's shapes (384 wide, FFN 1536), 4 sequences of 128 rows as the engine batches them
  for (TensorType t : {TensorType::F16, TensorType::Q8_0}) {
    for (auto [n_in, n_out] : {std::pair<int64_t, int64_t>{384, 384}, {384, 1536}, {1536, 384}}) {
      b->Args({static_cast<int64_t>(t), n_in, n_out, 512, 1, 0});
    }
  }
}

// The float rows' batch tiles called directly, whichever dispatch would choose on this CPU (the
// 512-bit one where use_avx512_fma_tiles(), else the 256-bit one over 32 registers): F16 weights, 512
// activation rows in matmul's chunks, one thread.
// Args: tile (0 = AVX2, 1 = AVX-512 512-bit FMAs, 2 = AVX-512 256-bit FMAs), n_in, n_out.
void BM_FloatTile(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  if (!k::use_avx2() || (which > 0 && !k::use_avx512())) {
    state.SkipWithError("the tile is not built for this CPU");
    return;
  }
  const TensorType t = TensorType::F16;
  const int64_t n = state.range(1), n_out = state.range(2), rows = 512;
  const k::RowKernels avx2 = k::avx2_row_kernels(t);
  const k::DotTileFn tiles[] = {avx2.dot_tile, k::avx512::dot_tile_fma_f16, k::avx512::dot_tile_fma256_f16};
  const k::DotTileFn tile = tiles[which];
  const std::vector<uint8_t> w = weights(t, n, n_out);
  const std::vector<float> x = activations(n * rows);
  const uint64_t act_bytes = avx2.act_row_bytes(n);
  std::vector<uint8_t> act(act_bytes * rows);
  for (int64_t r = 0; r < rows; ++r) avx2.quantize_act(x.data() + r * n, act.data() + r * act_bytes, n);
  std::vector<float> y(n_out * rows);
  constexpr int64_t kChunkRows = 96;  // as matmul's chunks of a large batch
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; r += kChunkRows) {
      tile(n, w.data(), k::quant_row_bytes(t, n), n_out, act.data() + r * act_bytes, act_bytes,
           static_cast<int>(std::min(kChunkRows, rows - r)), y.data() + r * n_out, n_out);
    }
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n_out * rows * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  const char* labels[] = {"avx2-tiles", "avx512-fma-tiles", "avx512-fma256-tiles"};
  state.SetLabel(labels[which]);
}

// Batched decode: a few rows (one per running sequence) against the output matrix of Qwen3-0.6B's shape
// (1024 × 151,936), far larger than L2, so the weights stream from memory as in a serving step.
// Args: type, rows, threads, interleaved layout (1) or row layout (0).
void BM_MatmulBatch(benchmark::State& state) {
  const int64_t rows = state.range(1);
  time_matmul(state, static_cast<TensorType>(state.range(0)), 1024, 151936, rows, static_cast<int>(state.range(2)),
              state.range(3) != 0);
  state.counters["rows/s"] = benchmark::Counter(double(rows) * state.iterations(), benchmark::Counter::kIsRate);
}

// A small batch against a 1024 × 1024 interleaved matrix in L2, one thread: the kernels' compute
// alone. Counter: units (16 weight rows × 256 codes, against all the rows) per second.
void BM_MatmulBatchHot(benchmark::State& state) {
  const auto t = static_cast<TensorType>(state.range(0));
  time_matmul(state, t, 1024, 1024, state.range(1), 1, true);
  state.counters["units/s"] =
      benchmark::Counter(double(state.iterations()) * (1024 / 16) * (1024 / 256), benchmark::Counter::kIsRate);
}

void batch_args(benchmark::internal::Benchmark* b) {
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::Q4_0,
                       TensorType::F16}) {
    for (int64_t rows : {1, 2, 4, 6, 8, 12, 16}) {
      for (int interleaved : {0, 1}) b->Args({static_cast<int64_t>(t), rows, 2, interleaved});
      b->Args({static_cast<int64_t>(t), rows, 1, 1});
    }
  }
  for (TensorType t : {TensorType::Q5_0, TensorType::Q5_1, TensorType::BF16}) {  // the row layout only
    for (int64_t rows : {1, 2, 4, 6, 8, 12, 16}) b->Args({static_cast<int64_t>(t), rows, 2, 0});
  }
  // where the K-quants' unpacked tile (k_tile_avx512.h) overtakes the interleaved rows kernel
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    for (int64_t rows : {24, 32, 48, 64}) b->Args({static_cast<int64_t>(t), rows, 2, 1});
  }
}

}  // namespace

BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeQwen3Step)->Args({0, 2})->Args({1, 2})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DecodeQwen3Rows)->Args({1, 2})->Args({4, 2})->Args({8, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulDecode)->Apply(decode_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MatmulDecodeHot)->Arg(8)->Arg(12)->Arg(14)->Arg(13)->Arg(2)->Arg(6)->Arg(7)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MatmulBatchHot)->ArgsProduct({{12, 14}, {1, 4, 8, 16}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MatmulBatch)->Apply(batch_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FloatTile)->ArgsProduct({{0, 1, 2}, {1024, 2048, 8192}, {2048}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MatmulPrefill)->Apply(prefill_args)->Unit(benchmark::kMillisecond)->UseRealTime();
