// Layer streaming (issue 24) on the CPU device: the planner; the forward pass with the layers streamed
// through slots on a budget of a quarter of their bytes, bitwise the logits of resident mode, also with
// a slow, jittery copy thread; the checks that no slot is refilled while its layer reads it (and that
// they catch it when it is); and a budget too small for one layer failing at load, naming the bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "forward_harness.h"
#include "model/cpu_stream_device.h"
#include "model/layer_streamer.h"
#include "model/model.h"
#include "model/stream_plan.h"
#include "reference_data.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

using model::CpuStreamDevice;
using model::LayerStreamer;
using model::StreamPlan;
using model::StreamPlanInput;

constexpr uint64_t kMiB = 1 << 20;

StreamPlanInput uniform_layers(int n, uint64_t layer, uint64_t other, uint64_t budget) {
  StreamPlanInput in;
  in.layer_bytes.assign(size_t(n), layer);
  in.other_bytes = other;
  in.budget_bytes = budget;
  return in;
}

// Runs f, expecting an exception of type E whose message contains every one of `parts`.
template <class E, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// ---------------- the planner ----------------

TEST(StreamPlan, EverythingStaysResidentWhenItFits) {
  const StreamPlan p = model::plan_streaming(uniform_layers(8, kMiB, 3 * kMiB, 11 * kMiB));
  EXPECT_FALSE(p.streams());
  EXPECT_EQ(p.resident_layers, 8);
  EXPECT_EQ(p.depth, 0);
  EXPECT_EQ(p.streamed_bytes_per_pass, 0u);
  EXPECT_EQ(p.device_bytes, 11 * kMiB);
}

TEST(StreamPlan, AutoDepthHidesTheCopyBehindTheComputeAndTheRestStaysResident) {
  // 1 MiB at 100 MiB/s: a 10 ms copy behind a 4 ms layer needs ceil(2.5) + 1 = 4 slots; the other 6
  // MiB of the budget keep layers 0..5 resident.
  StreamPlanInput in = uniform_layers(32, kMiB, kMiB, 11 * kMiB);
  in.copy_bytes_per_s = 100.0 * kMiB;
  in.layer_compute_s = 0.004;
  StreamPlan p = model::plan_streaming(in);
  EXPECT_EQ(p.depth, 4);
  EXPECT_EQ(p.resident_layers, 6);
  EXPECT_EQ(p.slot_bytes, kMiB);
  EXPECT_EQ(p.streamed_bytes_per_pass, 26 * kMiB);
  EXPECT_EQ(p.device_bytes, 11 * kMiB);

  in.layer_compute_s = 0.040;  // the copy hides behind one layer: double buffering
  p = model::plan_streaming(in);
  EXPECT_EQ(p.depth, 2);
  EXPECT_EQ(p.resident_layers, 8);

  in.copy_bytes_per_s = 0;  // unknown bandwidth: double buffering
  EXPECT_EQ(model::plan_streaming(in).depth, 2);
}

TEST(StreamPlan, AutoDepthShrinksToWhatTheBudgetHolds) {
  StreamPlanInput in = uniform_layers(16, kMiB, kMiB, 4 * kMiB);
  in.copy_bytes_per_s = 100.0 * kMiB;
  in.layer_compute_s = 0.001;  // wants 11 slots
  StreamPlan p = model::plan_streaming(in);
  EXPECT_EQ(p.depth, 3);
  EXPECT_EQ(p.resident_layers, 0);

  in.budget_bytes = kMiB + kMiB + kMiB / 2;  // room for one slot only
  p = model::plan_streaming(in);
  EXPECT_EQ(p.depth, 1);
  EXPECT_EQ(p.resident_layers, 0);
  EXPECT_EQ(p.streamed_bytes_per_pass, 16 * kMiB);
}

TEST(StreamPlan, DepthNeverExceedsTheStreamedLayers) {
  StreamPlanInput in = uniform_layers(4, kMiB, kMiB, 100 * kMiB);
  in.resident_layers = 2;
  in.depth = 5;
  const StreamPlan p = model::plan_streaming(in);
  EXPECT_EQ(p.depth, 2);
  EXPECT_EQ(p.device_bytes, 5 * kMiB);
}

TEST(StreamPlan, RequestedResidentLayersAndDepthAreKept) {
  StreamPlanInput in = uniform_layers(10, kMiB, kMiB, 8 * kMiB);
  in.resident_layers = 2;
  in.depth = 3;
  StreamPlan p = model::plan_streaming(in);
  EXPECT_EQ(p.resident_layers, 2);
  EXPECT_EQ(p.depth, 3);
  EXPECT_EQ(p.device_bytes, 6 * kMiB);

  in.depth = 0;  // auto depth beside the requested prefix: the deepest that fits (capped by the target 2)
  p = model::plan_streaming(in);
  EXPECT_EQ(p.resident_layers, 2);
  EXPECT_EQ(p.depth, 2);

  in.resident_layers = -1;  // requested depth, auto prefix: the rest of the budget
  in.depth = 3;
  p = model::plan_streaming(in);
  EXPECT_EQ(p.resident_layers, 4);
  EXPECT_EQ(p.depth, 3);

  in.resident_layers = 0;  // stream everything, even though some would fit
  in.depth = 0;
  p = model::plan_streaming(in);
  EXPECT_EQ(p.resident_layers, 0);
  EXPECT_EQ(p.streamed_bytes_per_pass, 10 * kMiB);
}

TEST(StreamPlan, SlotIsTheLargestStreamedLayerAligned) {
  StreamPlanInput in;
  in.layer_bytes = {9000, 5000, 3000, 1000};
  in.other_bytes = 100;
  in.budget_bytes = 100000;
  in.resident_layers = 1;
  in.depth = 2;
  const StreamPlan p = model::plan_streaming(in);
  EXPECT_EQ(p.slot_bytes, 5120u);  // 5000 rounded up to 256
  EXPECT_EQ(p.resident_bytes, 9000u);
  EXPECT_EQ(p.streamed_bytes_per_pass, 9000u);
  EXPECT_EQ(p.device_bytes, 100u + 9000u + 2 * 5120u);
}

TEST(StreamPlan, BudgetTooSmallForOneLayerIsAClearErrorNamingTheBytes) {
  // 1000 bytes of non-layer weights and a largest layer of 2048: at least 3048 are needed.
  StreamPlanInput in = uniform_layers(4, 2048, 1000, 3047);
  expect_error<std::runtime_error>([&] { model::plan_streaming(in); },
                                   {"3047 bytes", "non-layer weights (1000 bytes", "largest layer (2048 bytes",
                                    "at least 3048 bytes"});
  in.budget_bytes = 3048;
  EXPECT_EQ(model::plan_streaming(in).depth, 1);
  in.budget_bytes = 500;  // below even the non-layer weights
  expect_error<std::runtime_error>([&] { model::plan_streaming(in); }, {"500 bytes", "at least 3048 bytes"});
}

TEST(StreamPlan, RequestsThatDoNotFitAreClearErrors) {
  StreamPlanInput in = uniform_layers(10, kMiB, kMiB, 8 * kMiB);
  in.resident_layers = 6;  // 1 + 6 + 1 slot = 8 fits; 7 resident does not
  EXPECT_EQ(model::plan_streaming(in).depth, 1);
  in.resident_layers = 7;
  expect_error<std::runtime_error>([&] { model::plan_streaming(in); },
                                   {"keeping 7 layers resident (7340032 bytes", "needs 9437184 bytes",
                                    "budget of 8388608 bytes"});
  in.resident_layers = 10;
  expect_error<std::runtime_error>([&] { model::plan_streaming(in); }, {"all 10 layers", "11534336 bytes"});
  in.resident_layers = -1;
  in.depth = 8;
  expect_error<std::runtime_error>([&] { model::plan_streaming(in); }, {"8 slots of 1048576 bytes", "9437184 bytes"});
}

TEST(StreamPlan, MalformedRequestsAreRejected) {
  StreamPlanInput in = uniform_layers(4, kMiB, kMiB, 100 * kMiB);
  in.resident_layers = 5;
  EXPECT_THROW(model::plan_streaming(in), std::invalid_argument);
  in.resident_layers = -2;
  EXPECT_THROW(model::plan_streaming(in), std::invalid_argument);
  in.resident_layers = -1;
  in.depth = -1;
  EXPECT_THROW(model::plan_streaming(in), std::invalid_argument);
  EXPECT_THROW(model::plan_streaming(uniform_layers(0, kMiB, kMiB, kMiB)), std::invalid_argument);
}

// ---------------- the CPU device ----------------

TEST(CpuStreamDevice, AllocationPastTheBudgetIsAClearError) {
  CpuStreamDevice dev({.budget_bytes = 4096});
  void* a = dev.alloc(3000);  // rounded to 3072
  EXPECT_EQ(dev.used_bytes(), 3072u);
  expect_error<std::runtime_error>([&] { dev.alloc(1025); }, {"1280 bytes", "3072 in use", "budget of 4096 bytes"});
  dev.free(a);
  EXPECT_EQ(dev.used_bytes(), 0u);
  dev.free(dev.alloc(4096));
}

// Copies of 10 to 20 ms each: wait_copied blocks until both are done.
TEST(CpuStreamDevice, CopiesRunInOrderOnTheCopyThreadAndWaitCopiedWaitsForThem) {
  CpuStreamDevice dev({.budget_bytes = 1 << 20, .max_copy_delay_us = 20000});
  dev.open_slots(2);
  std::vector<uint8_t> src(4096);
  std::iota(src.begin(), src.end(), uint8_t(0));
  auto* dst = static_cast<uint8_t*>(dev.alloc(src.size()));
  dev.wait_consumed(1);
  dev.copy_async(1, dst, src.data(), 2048);
  dev.copy_async(1, dst + 2048, src.data() + 2048, 2048);
  dev.record_copied(1);
  dev.wait_copied(1);
  EXPECT_EQ(0, std::memcmp(dst, src.data(), src.size()));
  dev.record_consumed(1);
  EXPECT_EQ(dev.stats().compute_waits, 1u);
  EXPECT_EQ(dev.stats().copies, 2u);
  EXPECT_EQ(dev.stats().overlaps, 0u);
}

// The check itself: a copy queued into a slot between wait_copied and record_consumed (what the
// streamer never does) is counted.
TEST(CpuStreamDevice, ACopyIntoASlotBeingReadIsCounted) {
  CpuStreamDevice dev({.budget_bytes = 1 << 20});
  dev.open_slots(1);
  std::vector<uint8_t> src(256, 7);
  void* dst = dev.alloc(256);
  dev.wait_copied(0);  // the compute stream reads slot 0 from here ...
  dev.copy_async(0, dst, src.data(), src.size());
  dev.synchronize();
  dev.record_consumed(0);  // ... to here
  EXPECT_EQ(dev.stats().overlaps, 1u);
  dev.wait_consumed(0);
  dev.copy_async(0, dst, src.data(), src.size());
  dev.synchronize();
  EXPECT_EQ(dev.stats().overlaps, 1u);
}

// ---------------- the layer layout ----------------

// phi3's q/k/v and gate/up are row ranges of one tensor each: each is copied as its own range, and a
// rebased matrix keeps every field but its pointer (the interleaved flags set here by hand: this CPU
// may or may not have interleaved kernels).
TEST(LayerLayout, FusedViewsAreTheirOwnPiecesAndRebaseKeepsEveryOtherField) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto m = model::Model::load(reference_model_path("tiny-phi3-q4_k_m"));
  const model::HParams& hp = m->hparams();
  model::LayerWeights L = m->layers()[1];
  L.wq.interleaved = false;
  L.wk.interleaved = true;
  const model::LayerLayout layout = model::layer_layout(hp, L);
  // wq, wk, wv, wo, gate, up, down; attn_norm, ffn_norm
  ASSERT_EQ(layout.pieces.size(), 9u);
  EXPECT_EQ(layout.pieces[1].src, L.wk.data);
  EXPECT_EQ(layout.pieces[1].bytes, uint64_t(hp.kv_dim()) * L.wk.row_bytes);
  EXPECT_EQ(static_cast<const uint8_t*>(layout.pieces[1].src),
            static_cast<const uint8_t*>(layout.pieces[0].src) + layout.pieces[0].bytes);  // adjacent in the file
  EXPECT_EQ(layout.pieces[8].bytes, uint64_t(hp.n_embd) * sizeof(float));
  for (const model::LayerPiece& p : layout.pieces) EXPECT_EQ(p.offset % 256, 0u);
  EXPECT_EQ(layout.bytes % 256, 0u);

  std::vector<uint8_t> block(layout.bytes);
  uint8_t* base = block.data();
  const model::LayerWeights moved = model::rebase(hp, L, layout, base);
  EXPECT_EQ(moved.wk.data, base + layout.pieces[1].offset);
  EXPECT_TRUE(moved.wk.interleaved);
  EXPECT_FALSE(moved.wq.interleaved);
  EXPECT_EQ(moved.wk.type, L.wk.type);
  EXPECT_EQ(moved.wk.n_in, L.wk.n_in);
  EXPECT_EQ(moved.wk.n_out, L.wk.n_out);
  EXPECT_EQ(moved.wk.row_bytes, L.wk.row_bytes);
  EXPECT_EQ(moved.w_up.data, base + layout.pieces[5].offset);
  EXPECT_EQ(moved.ffn_norm, reinterpret_cast<const float*>(base + layout.pieces[8].offset));
  EXPECT_EQ(moved.bq, nullptr);
  EXPECT_EQ(moved.router.data, nullptr);
}

// ---------------- streaming through the forward pass ----------------

// The reference's long prompt and its continuation: 20 prompt tokens and 4 decode steps.
std::vector<int32_t> sample_tokens(const std::string& name) {
  const auto recs = load_reference(name);
  std::vector<int32_t> t = recs.at(5).prompt_ids;
  t.insert(t.end(), recs.at(5).greedy_ids.begin(), recs.at(5).greedy_ids.end());
  t.resize(24, 1);
  return t;
}
const std::vector<size_t> kChunks = {7, 1, 12, 1, 1, 1, 1};  // the prompt in three chunks, then decode

// Every row's logits, the layers read from `source` (null: from the model).
std::vector<std::vector<float>> run(const model::Model& m, model::LayerSource* source,
                                    const std::vector<int32_t>& tokens) {
  ForwardHarness h(m, 2, 1, int(tokens.size()) + 1);
  h.forward().set_layer_source(source);
  std::vector<std::vector<float>> out;
  size_t at = 0;
  for (size_t c : kChunks) {
    auto logits = h.feed(0, {tokens.begin() + long(at), tokens.begin() + long(at + c)});
    out.insert(out.end(), logits.begin(), logits.end());
    at += c;
  }
  return out;
}

// The planner's input for a model on a budget of `layer_budget` bytes beside its non-layer weights.
StreamPlanInput model_input(const model::Model& m, uint64_t layer_budget) {
  StreamPlanInput in;
  in.layer_bytes = model::layer_device_bytes(m);
  in.other_bytes = model::non_layer_bytes(m);
  in.budget_bytes = in.other_bytes + layer_budget;
  return in;
}

// A quarter of the layers' bytes, or one layer where a quarter holds less (a model of two layers).
uint64_t quarter_of_layers(const model::Model& m) {
  const auto bytes = model::layer_device_bytes(m);
  return std::max(std::accumulate(bytes.begin(), bytes.end(), uint64_t(0)) / 4,
                  *std::max_element(bytes.begin(), bytes.end()));
}

// Streams `m` on a CPU device of the input's budget (the non-layer weights allocated there
// too, unused), checking the logits against `resident` and every verification counter.
void expect_streaming_matches(const model::Model& m, const StreamPlanInput& in, const std::vector<int32_t>& tokens,
                              const std::vector<std::vector<float>>& resident, int max_copy_delay_us = 0) {
  const StreamPlan plan = model::plan_streaming(in);
  const std::string what = "resident " + std::to_string(plan.resident_layers) + ", depth " +
                           std::to_string(plan.depth) + ", copy delay " + std::to_string(max_copy_delay_us) + " us";
  ASSERT_TRUE(plan.streams()) << what;
  ASSERT_LE(plan.device_bytes, in.budget_bytes) << what;
  CpuStreamDevice dev({.budget_bytes = in.budget_bytes, .max_copy_delay_us = max_copy_delay_us});
  void* other = dev.alloc(in.other_bytes);  // where the embeddings and output would live
  uint64_t bytes_queued = 0;
  {
    LayerStreamer streamer(m, plan, dev, {.verify_contents = true});
    EXPECT_LE(dev.used_bytes(), in.budget_bytes) << what;
    expect_bitwise_equal(resident, run(m, &streamer, tokens), what);

    const uint64_t passes = kChunks.size(), streamed = uint64_t(plan.n_layer - plan.resident_layers);
    const LayerStreamer::Stats& st = streamer.stats();
    EXPECT_EQ(st.streamed_reads, passes * streamed) << what;
    EXPECT_EQ(st.layer_copies, passes * streamed + uint64_t(plan.depth)) << what;  // plus the next pass's first
    EXPECT_EQ(st.slot_mismatches, 0u) << what;
    EXPECT_EQ(st.contents_checked, 2 * st.streamed_reads) << what;
    bytes_queued = st.bytes_copied;
    // copies slower than the compute: it must have waited for them
    if (max_copy_delay_us > 0) {
      EXPECT_GT(dev.stats().compute_waits, 0u) << what;
    }
  }
  EXPECT_EQ(dev.stats().overlaps, 0u) << what;
  EXPECT_EQ(dev.stats().bytes, bytes_queued) << what;
  dev.free(other);
  EXPECT_EQ(dev.used_bytes(), 0u) << what;
}

class LayerStreaming : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(reference_dir());
    model_ = model::Model::load(reference_model_path(GetParam()));
    tokens_ = sample_tokens(GetParam());
    const auto start = std::chrono::steady_clock::now();
    resident_ = run(*model_, nullptr, tokens_);
    const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    layer_s_ = run_s / double(kChunks.size() * size_t(model_->hparams().n_layer));
  }
  // The copy delay (copy_delay_us's max) that makes a layer's copy last about `times` its compute in
  // this build (a sanitizer build computes many times slower).
  int copy_delay_us(double times) const {
    const auto pieces = model::layer_layout(model_->hparams(), model_->layers()[0]).pieces.size();
    return std::max(2, int(times * layer_s_ * 1e6 / (0.75 * double(pieces))));
  }
  std::unique_ptr<model::Model> model_;
  std::vector<int32_t> tokens_;
  std::vector<std::vector<float>> resident_;
  double layer_s_ = 0;  // one layer's compute in the resident run, on average
};

TEST_P(LayerStreaming, QuarterOfTheLayersOnTheDeviceGivesBitwiseTheResidentLogits) {
  expect_streaming_matches(*model_, model_input(*model_, quarter_of_layers(*model_)), tokens_, resident_);
}

TEST_P(LayerStreaming, EveryResidentPrefixAndDepthGivesBitwiseTheResidentLogits) {
  const int n = model_->hparams().n_layer;
  for (int r = 0; r < n; ++r) {
    for (int d = 1; d <= n - r; ++d) {
      StreamPlanInput in = model_input(*model_, 0);
      in.resident_layers = r;
      in.depth = d;
      in.budget_bytes = ~uint64_t(0);
      in.budget_bytes = model::plan_streaming(in).device_bytes;  // exactly what it needs
      expect_streaming_matches(*model_, in, tokens_, resident_);
    }
  }
}

// Copies of random length, about 4 times a layer's compute, so that the compute waits for them; then
// short copies beside a compute that sleeps up to 0.6 ms before and after each layer, so that the
// compute waits for some and the copies queue up behind others: the same logits, no slot refilled early.
TEST_P(LayerStreaming, SlowJitteryCopiesGiveBitwiseTheResidentLogits) {
  StreamPlanInput in = model_input(*model_, quarter_of_layers(*model_) * 2);
  in.resident_layers = 0;
  expect_streaming_matches(*model_, in, tokens_, resident_, copy_delay_us(4));
  in.depth = std::min(3, model_->hparams().n_layer);
  in.budget_bytes = ~uint64_t(0);
  in.resident_layers = 0;
  in.budget_bytes = model::plan_streaming(in).device_bytes;
  expect_streaming_matches(*model_, in, tokens_, resident_, copy_delay_us(4));

  // the compute jitters too: a source that sleeps at random around the streamer's acquire and release
  struct Jittery final : model::LayerSource {
    LayerStreamer& s;
    int max_nap_us;
    std::mt19937 rng{7};
    Jittery(LayerStreamer& st, int nap_us) : s(st), max_nap_us(nap_us) {}
    void nap() {
      std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, max_nap_us)(rng)));
    }
    const model::LayerWeights& acquire(int l) override { nap(); return s.acquire(l); }
    void release(int l) override { nap(); s.release(l); }
  };
  const StreamPlan plan = model::plan_streaming(in);
  CpuStreamDevice dev({.budget_bytes = plan.device_bytes, .max_copy_delay_us = 40, .seed = 3});
  {
    LayerStreamer streamer(*model_, plan, dev, {.verify_contents = true});
    Jittery jittery(streamer, 600);
    expect_bitwise_equal(resident_, run(*model_, &jittery, tokens_), "jittery compute");
    EXPECT_EQ(streamer.stats().slot_mismatches, 0u);
    std::printf("[jittery compute] %llu of %llu streamed reads waited\n", (unsigned long long)dev.stats().compute_waits,
                (unsigned long long)streamer.stats().streamed_reads);
  }
  EXPECT_EQ(dev.stats().overlaps, 0u);
}

TEST_P(LayerStreaming, BudgetTooSmallForOneLayerFailsAtLoadNamingTheBytes) {
  const auto bytes = model::layer_device_bytes(*model_);
  const uint64_t largest = *std::max_element(bytes.begin(), bytes.end());
  const StreamPlanInput in = model_input(*model_, largest - 1);
  expect_error<std::runtime_error>([&] { model::plan_streaming(in); },
                                   {"cannot hold", std::to_string(in.budget_bytes) + " bytes",
                                    std::to_string(in.other_bytes) + " bytes", std::to_string(largest) + " bytes",
                                    "at least " + std::to_string(in.other_bytes + largest) + " bytes"});

  // A plan for a larger device than the one at hand fails in the allocator, naming the budget.
  StreamPlanInput roomy = model_input(*model_, largest);
  const StreamPlan plan = model::plan_streaming(roomy);
  CpuStreamDevice dev({.budget_bytes = largest - 1});
  expect_error<std::runtime_error>([&] { LayerStreamer(*model_, plan, dev); },
                                   {"budget of " + std::to_string(largest - 1) + " bytes"});
  EXPECT_EQ(dev.used_bytes(), 0u);
}

// A pass abandoned midway (a layer acquired, never released) is caught up by the next pass.
TEST_P(LayerStreaming, AnAbandonedPassIsCaughtUp) {
  const StreamPlan plan = model::plan_streaming(model_input(*model_, quarter_of_layers(*model_)));
  CpuStreamDevice dev({.budget_bytes = plan.device_bytes});
  LayerStreamer streamer(*model_, plan, dev, {.verify_contents = true});
  streamer.acquire(0);
  streamer.release(0);
  streamer.acquire(model_->hparams().n_layer - 1);
  expect_bitwise_equal(resident_, run(*model_, &streamer, tokens_), "after an abandoned pass");
  EXPECT_EQ(streamer.stats().slot_mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Models, LayerStreaming,
                         ::testing::Values("tiny-llama-q4_k_m", "tiny-qwen2-q8_0", "tiny-qwen3-q8_0",
                                           "tiny-gemma3-q8_0", "tiny-phi3-q4_k_m", "tiny-qwen3moe-q4_k_m"),
                         param_name);

// bert: post-LayerNorms, biases and a fused attn_qkv; an embedding model, so the hidden states compare.
TEST(LayerStreamingBert, QuarterOfTheLayersGivesBitwiseTheResidentHiddenStates) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto m = model::Model::load(reference_dir() + "/models/tiny-bert-q8_0.gguf");
  const model::HParams& hp = m->hparams();
  auto hidden = [&](model::LayerSource* source) {
    kernels::ThreadPool pool(2);
    model::KvPool kv(hp, 16, 2);
    model::Forward f(*m, pool, 32);
    f.set_layer_source(source);
    const std::vector<int32_t> table = {1, 0};
    model::Batch batch;
    batch.seqs.push_back({table.data(), 2});
    for (int i = 0; i < 20; ++i) batch.rows.push_back({0, i, int32_t(100 + 37 * i), false, true});
    std::vector<float> out(size_t(20 * hp.n_embd));
    f.run(batch, kv, nullptr, out.data());
    f.run(batch, kv, nullptr, out.data());  // twice: the second pass reads the prefetched slots
    return out;
  };
  const std::vector<float> resident = hidden(nullptr);
  const StreamPlan plan = model::plan_streaming(model_input(*m, quarter_of_layers(*m)));
  ASSERT_TRUE(plan.streams());
  CpuStreamDevice dev({.budget_bytes = plan.device_bytes, .max_copy_delay_us = 100});
  LayerStreamer streamer(*m, plan, dev, {.verify_contents = true});
  const std::vector<float> streamed = hidden(&streamer);
  EXPECT_EQ(0, std::memcmp(resident.data(), streamed.data(), resident.size() * sizeof(float)));
  EXPECT_EQ(streamer.stats().slot_mismatches, 0u);
  EXPECT_EQ(streamer.stats().streamed_reads, uint64_t(2 * hp.n_layer));
}

// The slot check catches a slot that does not hold its layer: a device that loses one copy.
TEST(LayerStreamingChecks, ALostCopyIsCaughtBySlotVerification) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto m = model::Model::load(reference_model_path("tiny-llama-q4_k_m"));
  struct LossyDevice final : CpuStreamDevice {
    using CpuStreamDevice::CpuStreamDevice;
    int calls = 0, lose = 0;
    void copy_async(int slot, void* dst, const void* src, uint64_t bytes) override {
      if (++calls != lose) CpuStreamDevice::copy_async(slot, dst, src, bytes);
    }
  };
  StreamPlanInput in = model_input(*m, 0);
  in.resident_layers = 0;
  in.depth = 2;
  in.budget_bytes = ~uint64_t(0);
  const StreamPlan plan = model::plan_streaming(in);
  LossyDevice dev({.budget_bytes = plan.device_bytes});
  // The first piece of the third layer copy: slot 0's refill with layer 2 keeps layer 0's wq bytes.
  dev.lose = int(2 * model::layer_layout(m->hparams(), m->layers()[0]).pieces.size()) + 1;
  LayerStreamer streamer(*m, plan, dev, {.verify_contents = true});
  const std::vector<int32_t> tokens = sample_tokens("tiny-llama-q4_k_m");
  const auto lossy = run(*m, &streamer, tokens);
  EXPECT_EQ(streamer.stats().slot_mismatches, 2u);  // layer 2 of the first pass, at acquire and release
  EXPECT_EQ(dev.stats().overlaps, 0u);
  // and the forward pass did read the slot: rows attending past position 0 in the first pass are off
  const auto resident = run(*m, nullptr, tokens);
  EXPECT_NE(0, std::memcmp(lossy[1].data(), resident[1].data(), resident[1].size() * sizeof(float)));
}

}  // namespace
}  // namespace infer::test
