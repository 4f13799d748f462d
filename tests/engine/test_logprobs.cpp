// Per-token log-probabilities (Request::logprobs, GenerateOptions::logprobs): LogprobRow's numerics on
// made-up rows, then through the Generator and the Engine on stories260K: the log-softmax of the raw
// logits row (checked against llama.cpp's full logits in the reference data and against the rows the
// engine itself computed), the top list, streaming, no change to the output, and invariant 7: a
// request's logprobs are bitwise the same whatever runs beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "engine/logprobs.h"
#include "engine_test_util.h"

namespace infer::engine {
namespace {

// log-softmax of `row` in long double, NaN as -inf.
std::vector<double> log_softmax(const std::vector<float>& row) {
  long double m = -INFINITY;
  for (float x : row)
    if (!std::isnan(x)) m = std::max<long double>(m, x);
  long double sum = 0;
  for (float x : row)
    if (!std::isnan(x)) sum += std::exp(static_cast<long double>(x) - m);
  std::vector<double> out;
  for (float x : row) out.push_back(std::isnan(x) ? -INFINITY : double(x - m - std::log(sum)));
  return out;
}

TokenLogprobs entry_for(const std::vector<float>& row, int n_top, int32_t id) {
  LogprobRow lp(n_top);
  lp.observe(row.data(), int(row.size()));
  TokenLogprobs e;
  lp.fill(id, row.data(), nullptr, &e);
  return e;
}

TEST(LogprobRow, IsTheLogSoftmaxOfTheRow) {
  std::vector<float> row;
  for (int i = 0; i < 1000; ++i) row.push_back(float(std::sin(i * 0.37) * 12.0 + (i % 7)));
  const std::vector<double> want = log_softmax(row);
  LogprobRow lp(20);
  lp.observe(row.data(), int(row.size()));
  double total = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    EXPECT_NEAR(lp.logprob(row[i]), want[i], 1e-5) << "token " << i;
    EXPECT_LE(lp.logprob(row[i]), 0.f);
    total += std::exp(double(lp.logprob(row[i])));
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(LogprobRow, LargeLogitsDoNotOverflow) {
  // exp(1000) overflows float and double alike: the maximum is subtracted first.
  const std::vector<float> row = {1000.f, -1000.f, 1000.f, 999.f};
  const double lse = 1000.0 + std::log(2.0 + std::exp(-1.0));
  TokenLogprobs e = entry_for(row, 2, 3);
  EXPECT_NEAR(e.logprob, 999.0 - lse, 1e-6);
  ASSERT_EQ(e.top.size(), 2u);
  EXPECT_EQ(e.top[0].id, 0);
  EXPECT_EQ(e.top[1].id, 2);
  EXPECT_EQ(e.top[0].logprob, e.top[1].logprob);
  EXPECT_NEAR(e.top[0].logprob, 1000.0 - lse, 1e-6);
  EXPECT_NEAR(entry_for(row, 0, 1).logprob, -1000.0 - lse, 1e-3);
}

TEST(LogprobRow, TopIsSortedWithTiesLowestIdFirst) {
  // Many ties: logits take 5 values only.
  std::vector<float> row;
  for (int i = 0; i < 300; ++i) row.push_back(float((i * 7) % 5));
  TokenLogprobs e = entry_for(row, 20, 0);
  ASSERT_EQ(e.top.size(), 20u);
  // The 60 tokens with logit 4 are i with 7i % 5 == 4, i.e. i % 5 == 2: the first 20 of them.
  for (int k = 0; k < 20; ++k) {
    EXPECT_EQ(e.top[size_t(k)].id, 2 + 5 * k);
    EXPECT_NEAR(e.top[size_t(k)].logprob, log_softmax(row)[2], 1e-6);
  }
  // Distinct values: strictly decreasing.
  std::vector<float> distinct;
  for (int i = 0; i < 500; ++i) distinct.push_back(float((i * 131) % 499) * 0.01f);
  TokenLogprobs d = entry_for(distinct, 20, 7);
  for (size_t k = 1; k < d.top.size(); ++k) EXPECT_GT(d.top[k - 1].logprob, d.top[k].logprob);
  // It is the partial sort of the whole row.
  std::vector<int32_t> ids(distinct.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::partial_sort(ids.begin(), ids.begin() + 20, ids.end(), [&](int32_t a, int32_t b) {
    return distinct[size_t(a)] != distinct[size_t(b)] ? distinct[size_t(a)] > distinct[size_t(b)] : a < b;
  });
  for (size_t k = 0; k < 20; ++k) EXPECT_EQ(d.top[k].id, ids[k]);
}

TEST(LogprobRow, ZeroAlternativesAndTinyVocabularies) {
  const std::vector<float> row = {0.5f, 2.f, -1.f};
  TokenLogprobs none = entry_for(row, 0, 1);
  EXPECT_TRUE(none.top.empty());
  EXPECT_NEAR(none.logprob, log_softmax(row)[1], 1e-6);
  TokenLogprobs all = entry_for(row, 20, 2);  // more wanted than the vocabulary has
  ASSERT_EQ(all.top.size(), 3u);
  EXPECT_EQ(all.top[0].id, 1);
  EXPECT_EQ(all.top[1].id, 0);
  EXPECT_EQ(all.top[2].id, 2);
  EXPECT_EQ(all.logprob, all.top[2].logprob);
}

TEST(LogprobRow, NanCountsAsMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> row = {nan, 1.f, nan, 1.f};
  TokenLogprobs e = entry_for(row, 3, 0);
  EXPECT_EQ(e.logprob, -INFINITY);
  ASSERT_EQ(e.top.size(), 3u);
  EXPECT_EQ(e.top[0].id, 1);
  EXPECT_EQ(e.top[1].id, 3);
  EXPECT_NEAR(e.top[0].logprob, -std::log(2.0), 1e-6);
  EXPECT_EQ(e.top[2].logprob, -INFINITY);
  // No finite logit at all: the maxima get 0, the rest -inf (never NaN).
  const std::vector<float> dead = {-INFINITY, nan, -INFINITY};
  TokenLogprobs d = entry_for(dead, 2, 1);
  EXPECT_EQ(d.logprob, -INFINITY);
  EXPECT_EQ(d.top[0].logprob, 0.f);
}

TEST(LogprobRow, RefusesCountsOutOfRange) {
  EXPECT_THROW(LogprobRow{-1}, std::invalid_argument);
  EXPECT_THROW(LogprobRow{kMaxLogprobs + 1}, std::invalid_argument);
  EXPECT_NO_THROW(LogprobRow{kMaxLogprobs});
}

// ---- stories260K through the Generator and the Engine ----

class LogprobsOnStories : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(infer::test::models_dir());
    model_ = model::Model::load(test::stories_path());
    tok_ = tokenizer::Tokenizer::from_gguf(model_->file());
    GeneratorOptions g;
    g.context = 512;  // the longest reference prompt has 286 tokens
    gen_ = std::make_unique<Generator>(*model_, tok_.get(), g);
  }
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<Generator> gen_;
};

const std::vector<int32_t> kOnceUponATime{1, 403, 407, 261, 378};

TEST_F(LogprobsOnStories, GeneratorMatchesTheLogSoftmaxOfItsOwnLogits) {
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_tokens = 24;
  o.logprobs = 5;
  o.logits_top_n = -1;  // every logit of every step
  GenerateResult r = gen_->generate(kOnceUponATime, o);
  ASSERT_EQ(r.logprobs.size(), r.ids.size());
  ASSERT_EQ(r.step_logits.size(), r.ids.size());
  for (size_t s = 0; s < r.ids.size(); ++s) {
    std::vector<float> row(size_t(model_->hparams().n_vocab));
    for (auto [id, logit] : r.step_logits[s]) row[size_t(id)] = logit;
    const std::vector<double> want = log_softmax(row);
    const TokenLogprobs& e = r.logprobs[s];
    EXPECT_EQ(e.id, r.ids[s]);
    EXPECT_EQ(e.piece, tok_->token_to_piece(e.id, false));
    EXPECT_NEAR(e.logprob, want[size_t(e.id)], 1e-5);
    ASSERT_EQ(e.top.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      // The captured list is sorted the same way (logit desc, lowest id first).
      EXPECT_EQ(e.top[k].id, r.step_logits[s][k].first);
      EXPECT_NEAR(e.top[k].logprob, want[size_t(e.top[k].id)], 1e-5);
      EXPECT_EQ(e.top[k].piece, tok_->token_to_piece(e.top[k].id, false));
    }
    // Greedy: the chosen token is the top one, with the very same value.
    EXPECT_EQ(e.top[0].id, e.id);
    EXPECT_EQ(e.top[0].logprob, e.logprob);
  }
}

// llama.cpp's full logits at steps 0 and 1 (../shared/reference/out/stories260K.jsonl): our logprobs
// are their log-softmax within the fidelity tolerance (0.01 σ on a logit moves a log-probability by at
// most twice that), and the top ids follow its greedy continuation.
TEST_F(LogprobsOnStories, MatchesTheLogSoftmaxOfLlamaCppLogits) {
  const std::string path = infer::test::reference_dir() + "/out/stories260K.jsonl";
  INFER_REQUIRE_DIR(infer::test::reference_dir());
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string line;
  int prompts = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    const auto prompt = j["prompt_ids"].get<std::vector<int32_t>>();
    const auto greedy = j["greedy_ids"].get<std::vector<int32_t>>();
    const auto full = j["steps_full"].get<std::vector<std::vector<float>>>();
    double mean = 0, var = 0;
    for (float x : full[0]) mean += x;
    mean /= double(full[0].size());
    for (float x : full[0]) var += (x - mean) * (x - mean);
    const double tol = 2 * 0.01 * std::sqrt(var / double(full[0].size()));
    GenerateOptions o;
    o.logprobs = 20;
    o.force = std::vector<int32_t>(greedy.begin(), greedy.begin() + 2);  // teacher-forced, scored
    GenerateResult r = gen_->generate(prompt, o);
    ASSERT_EQ(r.logprobs.size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      const std::vector<double> want = log_softmax(full[s]);
      const TokenLogprobs& e = r.logprobs[s];
      EXPECT_EQ(e.id, greedy[s]);
      EXPECT_NEAR(e.logprob, want[size_t(e.id)], tol) << j["prompt"] << " step " << s;
      for (const TokenAlternative& a : e.top)
        EXPECT_NEAR(a.logprob, want[size_t(a.id)], tol) << j["prompt"] << " step " << s << " id " << a.id;
      EXPECT_EQ(e.top[0].id, greedy[s]);
    }
    ++prompts;
  }
  EXPECT_GE(prompts, 5);
}

TEST_F(LogprobsOnStories, LogprobsChangeNothingElse) {
  GenerateOptions o;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 99;
  o.max_tokens = 40;
  GenerateResult off = gen_->generate(kOnceUponATime, o);
  o.logprobs = 3;
  GenerateResult on = gen_->generate(kOnceUponATime, o);
  EXPECT_EQ(off.ids, on.ids);
  EXPECT_EQ(off.text, on.text);
  EXPECT_TRUE(off.logprobs.empty());
  ASSERT_EQ(on.logprobs.size(), on.ids.size());
  // Sampling at temperature 1 from top-k 40 / top-p / min-p: the reported values are still the raw row's.
  for (const TokenLogprobs& e : on.logprobs) {
    EXPECT_LE(e.logprob, 0.f);
    EXPECT_LE(e.logprob, e.top[0].logprob);
  }
}

TEST_F(LogprobsOnStories, GeneratorRefusesCountsOutOfRange) {
  GenerateOptions o;
  o.logprobs = 21;
  EXPECT_THROW(gen_->generate(kOnceUponATime, o), std::invalid_argument);
  o.logprobs = -2;
  EXPECT_THROW(gen_->generate(kOnceUponATime, o), std::invalid_argument);
}

// Records the streamed logprobs too.
struct LogprobCollector : test::Collector {
  std::vector<TokenLogprobs> streamed;
  int null_entries = 0;
  Callbacks callbacks() {
    Callbacks cb = Collector::callbacks();
    cb.on_token = [this](int32_t, const std::string&, const TokenLogprobs* e) {
      std::lock_guard lk(mu);
      if (e) streamed.push_back(*e);
      else ++null_entries;
    };
    return cb;
  }
};

Handle submit(Engine& e, Request r, LogprobCollector& c) {
  auto res = e.submit(std::move(r), c.callbacks());
  if (auto* err = std::get_if<SubmitError>(&res)) {
    ADD_FAILURE() << "submit refused: " << err->message;
    return {};
  }
  return std::get<Handle>(res);
}

bool same(const TokenLogprobs& a, const TokenLogprobs& b) {
  if (a.id != b.id || a.piece != b.piece || std::memcmp(&a.logprob, &b.logprob, sizeof(float)) != 0 ||
      a.top.size() != b.top.size())
    return false;
  for (size_t k = 0; k < a.top.size(); ++k)
    if (a.top[k].id != b.top[k].id || a.top[k].piece != b.top[k].piece ||
        std::memcmp(&a.top[k].logprob, &b.top[k].logprob, sizeof(float)) != 0)
      return false;
  return true;
}

TEST(EngineLogprobs, StreamedAndInTheResultOnePerId) {
  REQUIRE_STORIES();
  auto e = Engine::create(test::small_options());
  Request r;
  r.prompt_ids = kOnceUponATime;
  r.max_tokens = 30;
  r.sampling.seed = 5;
  r.logprobs = 4;
  LogprobCollector c;
  c.capture_steps = 1000;
  submit(*e, r, c);
  ASSERT_TRUE(c.wait());
  const Result& res = c.result;
  ASSERT_EQ(res.logprobs.size(), res.ids.size());
  ASSERT_EQ(c.streamed.size(), res.ids.size());
  EXPECT_EQ(c.null_entries, 0);
  for (size_t s = 0; s < res.ids.size(); ++s) {
    EXPECT_TRUE(same(c.streamed[s], res.logprobs[s])) << "step " << s;
    EXPECT_EQ(res.logprobs[s].id, res.ids[s]);
    ASSERT_EQ(res.logprobs[s].top.size(), 4u);
    // The engine's own logits row (on_logits) gives these values.
    const std::vector<double> want = log_softmax(c.logits[s]);
    EXPECT_NEAR(res.logprobs[s].logprob, want[size_t(res.ids[s])], 1e-5);
    for (const TokenAlternative& a : res.logprobs[s].top) EXPECT_NEAR(a.logprob, want[size_t(a.id)], 1e-5);
  }

  // Off: nothing recorded, the callback gets null, the output is the same.
  r.logprobs = -1;
  LogprobCollector off;
  submit(*e, r, off);
  ASSERT_TRUE(off.wait());
  EXPECT_EQ(off.result.ids, res.ids);
  EXPECT_EQ(off.result.text, res.text);
  EXPECT_TRUE(off.result.logprobs.empty());
  EXPECT_TRUE(off.streamed.empty());
  EXPECT_EQ(off.null_entries, int(res.ids.size()));
}

TEST(EngineLogprobs, RefusesCountsOutOfRange) {
  REQUIRE_STORIES();
  auto e = Engine::create(test::small_options());
  for (int n : {-2, 21}) {
    Request r;
    r.prompt_ids = kOnceUponATime;
    r.logprobs = n;
    auto res = e->submit(r, {});
    auto* err = std::get_if<SubmitError>(&res);
    ASSERT_NE(err, nullptr) << n;
    EXPECT_EQ(err->kind, SubmitError::Kind::Invalid);
    EXPECT_NE(err->message.find("logprobs"), std::string::npos) << err->message;
  }
}

// Invariant 7 with logprobs on: the same request alone, among 7 others (which ask for logprobs or not),
// with 2 threads and with prefill chunked by 7: bitwise the same entries.
std::vector<TokenLogprobs> run_among(int threads, int step_tokens, int n_others) {
  EngineOptions o = test::small_options();
  o.threads = threads;
  o.step_tokens = step_tokens;
  o.prefix_cache = false;
  auto e = Engine::create(o);
  std::vector<std::unique_ptr<LogprobCollector>> others;
  auto submit_other = [&](int i) {
    Request r;
    r.prompt_ids = {1};
    for (int k = 0; k < 4 + 9 * i; ++k) r.prompt_ids.push_back(int32_t(3 + (k * 37 + i * 101) % 500));
    r.max_tokens = 10 + 5 * i;
    r.sampling.seed = uint64_t(77 + i);
    r.logprobs = i % 2 ? 20 : -1;
    others.push_back(std::make_unique<LogprobCollector>());
    submit(*e, r, *others.back());
  };
  for (int i = 0; i < n_others / 2; ++i) submit_other(i);
  Request target;
  target.prompt_ids = {1};
  for (int k = 0; k < 44; ++k) target.prompt_ids.push_back(int32_t(3 + (k * 37) % 500));
  target.max_tokens = 20;
  target.sampling.temperature = 0.9f;
  target.sampling.seed = 1234;
  target.logprobs = 20;
  LogprobCollector c;
  submit(*e, target, c);
  for (int i = n_others / 2; i < n_others; ++i) submit_other(i);
  EXPECT_TRUE(c.wait());
  for (auto& x : others) EXPECT_TRUE(x->wait());
  EXPECT_EQ(c.result.logprobs.size(), 20u);
  return c.result.logprobs;
}

TEST(EngineLogprobs, IndependentOfBatching) {
  REQUIRE_STORIES();
  const std::vector<TokenLogprobs> alone = run_among(1, 512, 0);
  ASSERT_EQ(alone.size(), 20u);
  for (auto [threads, step_tokens, others] : {std::tuple{1, 512, 7}, {2, 512, 7}, {2, 7, 7}, {1, 1, 0}}) {
    const std::vector<TokenLogprobs> got = run_among(threads, step_tokens, others);
    ASSERT_EQ(got.size(), alone.size());
    for (size_t s = 0; s < alone.size(); ++s)
      EXPECT_TRUE(same(alone[s], got[s])) << threads << " threads, step_tokens " << step_tokens << ", " << others
                                          << " others: step " << s;
  }
}

}  // namespace
}  // namespace infer::engine
