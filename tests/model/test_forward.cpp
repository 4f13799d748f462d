// model::Forward: against the scalar reference forward pass, invariant 7 (a row's logits are bitwise
// the same however it is batched, chunked or threaded), output selection, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "forward_harness.h"
#include "gguf_variant.h"
#include "kernels/matmul/matmul.h"
#include "model/model.h"
#include "reference_data.h"
#include "reference_forward.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

std::vector<int32_t> first(const std::vector<int32_t>& v, size_t n) {
  return {v.begin(), v.begin() + long(std::min(n, v.size()))};
}

// Tokens of the reference's long prompt plus its continuation: real text for stories260K.
std::vector<int32_t> sample_tokens(const std::string& model_name, size_t n) {
  const auto recs = load_reference(model_name);
  std::vector<int32_t> t = recs.at(5).prompt_ids;
  t.insert(t.end(), recs.at(5).greedy_ids.begin(), recs.at(5).greedy_ids.end());
  return first(t, n);
}

double stddev(const std::vector<float>& v) {
  double mean = 0, var = 0;
  for (float x : v) mean += x;
  mean /= double(v.size());
  for (float x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / double(v.size()));
}

// ---------------- (b) optimised forward vs the scalar reference ----------------

class MatchesReferenceForward : public ::testing::TestWithParam<std::string> {};

TEST_P(MatchesReferenceForward, LogitsWithinTolerance) {
  INFER_REQUIRE_DIR(reference_dir());
  const std::string name = GetParam();
  const auto model = model::Model::load(reference_model_path(name));
  const auto tokens = sample_tokens(name, 40);
  const auto want = ReferenceForward(*model).run(tokens);

  ForwardHarness h(*model, 2, 1, 64);
  auto got = h.feed(0, first(tokens, 30));  // a prefill batch, then decode steps
  for (size_t i = 30; i < tokens.size(); ++i) got.push_back(h.feed(0, {tokens[i]})[0]);

  const double tol = tolerance_factor(name) * stddev(want.back());
  double worst = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    for (size_t j = 0; j < want[p].size(); ++j) worst = std::max(worst, double(std::abs(got[p][j] - want[p][j])));
  }
  std::printf("[vs reference forward] %-20s max diff/sigma %.5f\n", name.c_str(), worst / (tol / tolerance_factor(name)));
  EXPECT_LE(worst, tol);
}

// The quantised mixture-of-experts files are left out: the reference forward does not round
// activations, so on them it routes some rows to other experts (spec architectures-more.md §3.4);
// test_fidelity.cpp checks them against llama.cpp, near-ties shown.
std::vector<std::string> models_without_quantised_experts() {
  std::vector<std::string> names;
  for (const std::string& n : reference_model_names()) {
    if (n.find("moe") == std::string::npos || n.ends_with("-f32")) names.push_back(n);
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, MatchesReferenceForward, ::testing::ValuesIn(models_without_quantised_experts()),
                         param_name);

// The yardstick itself: ../shared/models/README.md lists stories260K's logits after BOS computed in
// double precision from the F32 weights.
TEST(ReferenceForwardItself, MatchesTheDoublePrecisionLogitsOfStories260K) {
  INFER_REQUIRE_DIR(models_dir());
  const auto model = model::Model::load(models_dir() + "/stories260K.gguf");
  const auto logits = ReferenceForward(*model).run({1}).at(0);
  const std::vector<std::pair<int, double>> want{{403, 17.0235}, {385, 15.4062}, {410, 13.1083}, {317, 12.7692},
                                                 {407, 12.4181}, {0, -6.22291}, {1, 8.40434}, {2, -6.22374},
                                                 {3, -6.22254}};
  for (const auto& [id, value] : want) EXPECT_NEAR(logits[size_t(id)], value, 1e-4) << "token " << id;
  EXPECT_EQ(argmax(logits), 403);
}

// Optional tensors the reference files lack: llama3 `rope_freqs.weight` and qwen2 `output.bias`, added
// to real files; the optimised pass must apply them as the reference pass does (and they must matter).
void expect_optional_tensor_applied(const std::string& src_path, const GgufVariant& v, const std::string& tag) {
  const auto src = gguf::File::open(src_path);
  TempGguf tmp(*src, v, tag);
  const auto model = model::Model::load(tmp.path());
  const auto plain = model::Model::load(src_path);
  const std::vector<int32_t> tokens{1, 403, 407, 261, 378, 432, 383, 286};
  const auto want = ReferenceForward(*model).run(tokens);
  const auto without = ReferenceForward(*plain).run(tokens);
  ForwardHarness h(*model, 1, 1, 16);
  const auto got = h.feed(0, tokens);
  const double sigma = stddev(want.back());
  double worst = 0, effect = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    for (size_t j = 0; j < want[p].size(); ++j) {
      worst = std::max(worst, double(std::abs(got[p][j] - want[p][j])));
      effect = std::max(effect, double(std::abs(without[p][j] - want[p][j])));
    }
  }
  EXPECT_LE(worst, 0.01 * sigma) << tag;
  EXPECT_GT(effect, 0.1 * sigma) << tag << ": the tensor made no difference";
}

TEST(OptionalTensors, RopeFreqsDivideTheLlamaRopeAngles) {
  INFER_REQUIRE_DIR(models_dir());
  const std::vector<float> factors{1.f, 2.f, 8.f, 30.f};  // n_rot / 2 = 4 for stories260K
  GgufVariant v;
  v.put_tensors.push_back({"rope_freqs.weight", gguf::TensorType::F32, {4}, factors.data()});
  expect_optional_tensor_applied(models_dir() + "/stories260K.gguf", v, "rope-freqs");
}

TEST(OptionalTensors, Qwen2OutputBiasIsAddedToTheLogits) {
  INFER_REQUIRE_DIR(reference_dir());
  std::vector<float> bias(512);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = float(int(i % 7) - 3) * 0.5f;
  GgufVariant v;
  v.put_tensors.push_back({"output.bias", gguf::TensorType::F32, {512}, bias.data()});
  expect_optional_tensor_applied(reference_dir() + "/models/tiny-qwen2-f16.gguf", v, "output-bias");
}

// ---------------- (c) invariant 7 ----------------

// Logits of every row of sequence 0 fed as `chunks` (sizes of consecutive batches), optionally with a
// second sequence's rows in the same batches, on `n_threads` threads.
std::vector<std::vector<float>> run_sequence(const model::Model& m, const std::vector<int32_t>& tokens,
                                             const std::vector<size_t>& chunks, int n_threads,
                                             const std::vector<int32_t>* other = nullptr,
                                             model::DeviceKind device = model::DeviceKind::Cpu,
                                             kernels::KvType kv_type = kernels::KvType::F16) {
  model::DeviceOptions options{device};
  options.kv_type = kv_type;
  ForwardHarness h(m, n_threads, 2, int(tokens.size() + (other ? other->size() : 0)) + 1, 512, 16, options);
  std::vector<std::vector<float>> out;
  size_t at = 0, other_at = 0;
  for (size_t c : chunks) {
    std::vector<ForwardHarness::Chunk> batch;
    if (other && other_at < other->size()) {
      // The other sequence's rows go first, so ours sit at a different place in the batch.
      const size_t n = std::min<size_t>(c + 3, other->size() - other_at);
      batch.push_back({1, {other->begin() + long(other_at), other->begin() + long(other_at + n)}});
      other_at += n;
    }
    batch.push_back({0, {tokens.begin() + long(at), tokens.begin() + long(at + c)}});
    at += c;
    auto logits = h.feed(batch);
    const size_t skip = batch.size() == 2 ? batch[0].tokens.size() : 0;
    out.insert(out.end(), logits.begin() + long(skip), logits.end());
  }
  return out;
}

void check_invariant7(const std::string& name, kernels::KvType kv) {
  const auto model = model::Model::load(reference_model_path(name));
  const auto tokens = sample_tokens(name, 60);
  std::vector<int32_t> other = load_reference(name).at(2).prompt_ids;
  other.insert(other.end(), tokens.begin(), tokens.begin() + 40);

  // Baseline: prefill 50 rows in one batch, then 10 decode steps; one thread.
  std::vector<size_t> prefill_then_decode{50};
  for (int i = 0; i < 10; ++i) prefill_then_decode.push_back(1);
  const auto cpu = model::DeviceKind::Cpu;
  const auto alone = run_sequence(*model, tokens, prefill_then_decode, 1, nullptr, cpu, kv);

  expect_bitwise_equal(alone, run_sequence(*model, tokens, prefill_then_decode, 2, nullptr, cpu, kv), "2 threads");
  expect_bitwise_equal(alone, run_sequence(*model, tokens, prefill_then_decode, 1, &other, cpu, kv),
                       "batched with another sequence");
  expect_bitwise_equal(alone, run_sequence(*model, tokens, prefill_then_decode, 2, &other, cpu, kv),
                       "batched with another sequence, 2 threads");
  std::vector<size_t> chunked{7, 1, 20, 22};
  for (int i = 0; i < 10; ++i) chunked.push_back(1);
  expect_bitwise_equal(alone, run_sequence(*model, tokens, chunked, 1, nullptr, cpu, kv), "prefill in chunks 7+1+20+22");
  expect_bitwise_equal(alone, run_sequence(*model, tokens, std::vector<size_t>(60, 1), 2, nullptr, cpu, kv),
                       "token by token");
  expect_bitwise_equal(alone, run_sequence(*model, tokens, {60}, 2, &other, cpu, kv), "all in one batch");
}

class Invariant7 : public ::testing::TestWithParam<std::string> {};

TEST_P(Invariant7, RowLogitsBitwiseIndependentOfBatchingChunkingAndThreads) {
  INFER_REQUIRE_DIR(reference_dir());
  check_invariant7(GetParam(), kernels::KvType::F16);
}

INSTANTIATE_TEST_SUITE_P(Models, Invariant7,
                         ::testing::Values("stories260K", "tiny-llama-q8_0", "tiny-llama-q4_k_m", "tiny-qwen2-f16",
                                           "tiny-qwen3-q4_k_m", "tiny-gemma3-q8_0", "tiny-phi3-q4_k_m",
                                           "tiny-qwen3moe-q4_k_m", "tiny-qwen3moe-f32"),
                         param_name);

// The same with each quantised KV type: stories260K (8-wide heads, four to a block), head widths 32
// (llama), 64 with a sliding window (gemma3) and 128 (qwen3).
class Invariant7KvQ8_0 : public ::testing::TestWithParam<std::string> {};
class Invariant7KvQ4_0 : public ::testing::TestWithParam<std::string> {};

TEST_P(Invariant7KvQ8_0, RowLogitsBitwiseIndependentOfBatchingChunkingAndThreads) {
  INFER_REQUIRE_DIR(reference_dir());
  check_invariant7(GetParam(), kernels::KvType::Q8_0);
}

TEST_P(Invariant7KvQ4_0, RowLogitsBitwiseIndependentOfBatchingChunkingAndThreads) {
  INFER_REQUIRE_DIR(reference_dir());
  check_invariant7(GetParam(), kernels::KvType::Q4_0);
}

INSTANTIATE_TEST_SUITE_P(Models, Invariant7KvQ8_0,
                         ::testing::Values("stories260K", "tiny-llama-q4_k_m", "tiny-gemma3-q8_0", "tiny-qwen3-q4_k_m"),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Models, Invariant7KvQ4_0,
                         ::testing::Values("stories260K", "tiny-llama-q4_k_m", "tiny-gemma3-q8_0", "tiny-qwen3-q4_k_m"),
                         param_name);

// The same on the GPU: a row's logits bitwise the same alone, beside another sequence, and in any
// chunking of the prefill (threads play no part there).
class Invariant7Cuda : public ::testing::TestWithParam<std::string> {};

TEST_P(Invariant7Cuda, RowLogitsBitwiseIndependentOfBatchingAndChunking) {
  INFER_REQUIRE_DIR(reference_dir());
  INFER_REQUIRE_CUDA();
  const std::string name = GetParam();
  const auto model = model::Model::load(reference_model_path(name));
  const auto tokens = sample_tokens(name, 60);
  std::vector<int32_t> other = load_reference(name).at(2).prompt_ids;
  other.insert(other.end(), tokens.begin(), tokens.begin() + 40);
  const auto cuda = model::DeviceKind::Cuda;
  std::vector<size_t> prefill_then_decode{50};
  for (int i = 0; i < 10; ++i) prefill_then_decode.push_back(1);
  const auto alone = run_sequence(*model, tokens, prefill_then_decode, 1, nullptr, cuda);
  expect_bitwise_equal(alone, run_sequence(*model, tokens, prefill_then_decode, 1, &other, cuda),
                       "batched with another sequence");
  std::vector<size_t> chunked{7, 1, 20, 22};
  for (int i = 0; i < 10; ++i) chunked.push_back(1);
  expect_bitwise_equal(alone, run_sequence(*model, tokens, chunked, 1, nullptr, cuda), "prefill in chunks 7+1+20+22");
  expect_bitwise_equal(alone, run_sequence(*model, tokens, std::vector<size_t>(60, 1), 1, nullptr, cuda),
                       "token by token");
  expect_bitwise_equal(alone, run_sequence(*model, tokens, {60}, 1, &other, cuda), "all in one batch");
}

INSTANTIATE_TEST_SUITE_P(Models, Invariant7Cuda,
                         ::testing::Values("stories260K", "tiny-llama-q8_0", "tiny-llama-q4_k_m", "tiny-llama-f32",
                                           "tiny-llama-bf16", "tiny-qwen2-f16", "tiny-qwen3-q4_k_m", "tiny-gemma3-q8_0",
                                           "tiny-phi3-q4_k_m", "tiny-qwen3moe-q4_k_m"),
                         param_name);

// ---------------- outputs ----------------

class ForwardOutputs : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(models_dir());
    model_ = model::Model::load(models_dir() + "/stories260K.gguf");
  }
  std::unique_ptr<model::Model> model_;
};

TEST_F(ForwardOutputs, OnlyRowsThatWantLogitsAreWrittenInRowOrder) {
  const std::vector<int32_t> a{1, 403, 407, 261}, b{1, 385, 410};
  ForwardHarness ref(*model_, 1, 2, 16);
  const auto all = ref.feed({{0, a}, {1, b}});  // every row's logits

  kernels::ThreadPool pool(1);
  model::KvPool kv(model_->hparams(), 16, 4);
  model::Forward fwd(*model_, pool, 16);
  const int32_t pages_a[] = {0}, pages_b[] = {3};
  model::Batch batch;
  batch.seqs = {{pages_a, 1}, {pages_b, 1}};
  for (int i = 0; i < 4; ++i) batch.rows.push_back({0, i, a[size_t(i)], i == 3});
  for (int i = 0; i < 3; ++i) batch.rows.push_back({1, i, b[size_t(i)], i == 1});
  const int V = model_->hparams().n_vocab;
  std::vector<float> logits(2 * size_t(V), -1.f), hidden(2 * size_t(model_->hparams().n_embd));
  fwd.run(batch, kv, logits.data(), hidden.data());
  EXPECT_EQ(0, std::memcmp(logits.data(), all[3].data(), size_t(V) * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(logits.data() + V, all[5].data(), size_t(V) * sizeof(float)));

  // The hidden state is the classifier's input: output · hidden gives the same logits.
  std::vector<float> again(2 * size_t(V));
  kernels::matmul_ref(model_->output(), hidden.data(), 2, model_->hparams().n_embd, again.data(), V);
  for (size_t i = 0; i < again.size(); ++i) EXPECT_NEAR(again[i], logits[i], 1e-4f) << i;
}

TEST_F(ForwardOutputs, HiddenOnlyNeedsNoLogitsBuffer) {
  kernels::ThreadPool pool(1);
  model::KvPool kv(model_->hparams(), 16, 1);
  model::Forward fwd(*model_, pool, 4);
  const int32_t pages[] = {0};
  model::Batch batch{{{0, 0, 1, true}}, {{pages, 1}}};
  std::vector<float> hidden(size_t(model_->hparams().n_embd), 0.f);
  fwd.run(batch, kv, nullptr, hidden.data());
  double ss = 0;
  for (float x : hidden) ss += double(x) * x;
  EXPECT_GT(ss, 0.0);
}

TEST_F(ForwardOutputs, ProfileAddsEachPhaseAndLeavesTheOutputsAlone) {
  kernels::ThreadPool pool(1);
  const int V = model_->hparams().n_vocab;
  const std::vector<int32_t> ids{1, 403, 407, 261};
  auto run = [&](model::PassProfile* profile) {
    model::KvPool kv(model_->hparams(), 16, 1);
    model::Forward fwd(*model_, pool, 8);
    const int32_t pages[] = {0};
    model::Batch batch;
    batch.seqs = {{pages, 1}};
    for (int i = 0; i < 4; ++i) batch.rows.push_back({0, i, ids[size_t(i)], i == 3});
    std::vector<float> logits(static_cast<size_t>(V));
    fwd.run(batch, kv, logits.data(), nullptr, profile);
    return logits;
  };
  model::PassProfile profile;
  const auto timed = run(&profile);
  EXPECT_EQ(0, std::memcmp(timed.data(), run(nullptr).data(), size_t(V) * sizeof(float)));
  for (double phase : {profile.qkv_s, profile.attention_s, profile.output_s, profile.ffn_up_s, profile.ffn_down_s,
                       profile.classifier_s}) {
    EXPECT_GT(phase, 0.0);
  }
  EXPECT_GE(profile.other_s, 0.0);
  const model::PassProfile once = profile;
  run(&profile);  // a second pass adds to the same profile
  EXPECT_GT(profile.qkv_s, once.qkv_s);
  EXPECT_GT(profile.classifier_s, once.classifier_s);
  EXPECT_GT(profile.total_s(), once.total_s());
  profile.accumulate(once, -1);  // what the second pass added
  EXPECT_GT(profile.ffn_down_s, 0.0);
  EXPECT_LT(profile.total_s(), 10.0);
}

// ---------------- (d) bad input ----------------

class ForwardBadInput : public ForwardOutputs {
 protected:
  std::string run_error(model::BatchRow row, int n_pages = 1, int max_rows = 4, int rows = 1) {
    kernels::ThreadPool pool(1);
    model::KvPool kv(model_->hparams(), 16, 2);
    model::Forward fwd(*model_, pool, max_rows);
    std::vector<int32_t> pages(size_t(n_pages), 0);
    model::Batch batch;
    batch.seqs = {{pages.data(), n_pages}};
    for (int i = 0; i < rows; ++i) batch.rows.push_back(row);
    std::vector<float> logits(size_t(rows) * size_t(model_->hparams().n_vocab));
    try {
      fwd.run(batch, kv, logits.data());
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(ForwardBadInput, TokenIdOutOfRangeIsAClearError) {
  EXPECT_NE(run_error({0, 0, 512, true}).find("token id 512 out of range [0, 512)"), std::string::npos);
  EXPECT_NE(run_error({0, 0, -1, true}).find("token id -1"), std::string::npos);
}

TEST_F(ForwardBadInput, PositionPastTheContextIsAClearError) {
  const std::string e = run_error({0, 2048, 1, true}, 200);
  EXPECT_NE(e.find("position 2048 out of the context [0, 2048)"), std::string::npos) << e;
  EXPECT_NE(run_error({0, -1, 1, true}).find("position -1"), std::string::npos);
}

TEST_F(ForwardBadInput, PositionPastThePageTableIsAClearError) {
  const std::string e = run_error({0, 16, 1, true}, 1);
  EXPECT_NE(e.find("past the sequence's 1 KV pages"), std::string::npos) << e;
}

TEST_F(ForwardBadInput, PageOutsideThePoolIsAClearError) {
  kernels::ThreadPool pool(1);
  model::KvPool kv(model_->hparams(), 16, 2);
  model::Forward fwd(*model_, pool, 4);
  const int32_t pages[] = {7};
  model::Batch batch{{{0, 3, 1, false}}, {{pages, 1}}};
  EXPECT_THROW(fwd.run(batch, kv, nullptr), std::out_of_range);
}

TEST_F(ForwardBadInput, BatchLargerThanMaxRowsIsRefused) {
  const std::string e = run_error({0, 0, 1, false}, 1, 2, 3);
  EXPECT_NE(e.find("exceeds max_rows 2"), std::string::npos) << e;
}

}  // namespace
}  // namespace infer::test
