// Invariant 7 through the Engine: a request with a fixed seed yields bit-identical tokens and logits
// alone, among 7 other running requests, with 1 or 2 compute threads and with any prefill chunking
// (step_tokens). Checked on F32 (stories260K) and quantised (Q4_K_M, Q8_0) models.
#include <gtest/gtest.h>

#include <cstring>

#include "engine_test_util.h"

using namespace infer::engine;
using namespace infer::engine::test;

namespace {

struct Outcome {
  std::vector<int32_t> ids;
  std::vector<std::vector<float>> logits;  // every step's logits row
};

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p{1};
  for (int i = 1; i < n; ++i) p.push_back(int32_t(3 + (i * 37 + salt * 101) % 500));
  return p;
}

Request target_request() {
  Request r;
  r.prompt_ids = prompt_of(45, 0);  // several pages and several prefill chunks
  r.max_tokens = 20;
  r.sampling.temperature = 0.9f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0;
  r.sampling.seed = 1234;
  return r;
}

// Runs the target request with `n_others` concurrent requests around it (submitted before and after).
Outcome run_target(const std::string& model, int threads, int step_tokens, int n_others, bool prefix_cache = false) {
  EngineOptions o = small_options();
  o.model_path = model;
  o.threads = threads;
  o.step_tokens = step_tokens;
  o.prefix_cache = prefix_cache;
  auto e = Engine::create(o);
  std::vector<std::unique_ptr<Collector>> others;
  auto submit_other = [&](int i) {
    Request r;
    r.prompt_ids = prompt_of(5 + 9 * i, i + 1);
    r.max_tokens = 10 + 5 * i;
    r.sampling.seed = 77 + i;
    others.push_back(std::make_unique<Collector>());
    submit_ok(*e, r, *others.back());
  };
  for (int i = 0; i < n_others / 2; ++i) submit_other(i);
  Collector c;
  c.capture_steps = 1000;
  submit_ok(*e, target_request(), c);
  for (int i = n_others / 2; i < n_others; ++i) submit_other(i);
  EXPECT_TRUE(c.wait());
  for (auto& x : others) EXPECT_TRUE(x->wait());
  EXPECT_EQ(c.result.finish, FinishReason::Length);
  EXPECT_TRUE(wait_pool_free(*e));
  return {c.result.ids, c.logits};
}

void expect_bitwise_equal(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_EQ(a.ids, b.ids) << what;
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  ASSERT_FALSE(a.logits.empty());
  for (size_t s = 0; s < a.logits.size(); ++s) {
    ASSERT_EQ(a.logits[s].size(), b.logits[s].size());
    EXPECT_EQ(0, std::memcmp(a.logits[s].data(), b.logits[s].data(), a.logits[s].size() * sizeof(float)))
        << what << ": logits differ at step " << s;
  }
}

class EngineDeterminism : public ::testing::TestWithParam<std::string> {
 protected:
  std::string model_path() const {
    const std::string& name = GetParam();
    return name == "stories260K.gguf" ? stories_path() : infer::test::reference_dir() + "/models/" + name;
  }
};

}  // namespace

TEST_P(EngineDeterminism, SameTokensAndLogitsWhateverTheLoadThreadsAndChunking) {
  REQUIRE_STORIES();
  const std::string model = model_path();
  if (!std::filesystem::exists(model)) {
    if (infer::test::in_ci()) FAIL() << "missing " << model;
    GTEST_SKIP() << "missing " << model;
  }
  const Outcome alone = run_target(model, 1, 512, 0);
  ASSERT_EQ(alone.ids.size(), 20u);
  expect_bitwise_equal(alone, run_target(model, 1, 512, 7), "with 7 others");
  expect_bitwise_equal(alone, run_target(model, 2, 512, 0), "2 threads");
  expect_bitwise_equal(alone, run_target(model, 2, 512, 7), "2 threads, 7 others");
  expect_bitwise_equal(alone, run_target(model, 1, 1, 0), "step_tokens 1");
  expect_bitwise_equal(alone, run_target(model, 2, 7, 7), "step_tokens 7, 7 others");
  expect_bitwise_equal(alone, run_target(model, 1, 16, 7, true), "prefix cache on, 7 others");
}

// Sanitizer builds (10-50x slower) keep the F32 model: they look for races and leaks in the engine,
// not in the quantised kernels, which the Release run covers.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define INFER_DETERMINISM_MODELS ::testing::Values("stories260K.gguf")
#else
#define INFER_DETERMINISM_MODELS \
  ::testing::Values("stories260K.gguf", "tiny-qwen3-q4_k_m.gguf", "tiny-llama-q8_0.gguf")
#endif
INSTANTIATE_TEST_SUITE_P(Models, EngineDeterminism, INFER_DETERMINISM_MODELS,
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find(".gguf"));
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });
