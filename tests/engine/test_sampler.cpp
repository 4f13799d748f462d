// The sampler chain on hand-made logits: greedy, filters, penalties, determinism and validation.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace infer::engine {
namespace {

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  p.seed = 1;
  return p;
}

SamplingParams plain(uint64_t seed) {  // temperature 1, no filters
  SamplingParams p;
  p.temperature = 1;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.seed = seed;
  return p;
}

std::map<int32_t, int> histogram(Sampler& s, const std::vector<float>& logits, int n,
                                 const std::vector<int32_t>& history = {}) {
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) h[s.sample(logits.data(), history)]++;
  return h;
}

TEST(Sampler, GreedyIsArgmax) {
  std::vector<float> logits = {0.1f, 3.f, -2.f, 2.9f, 1.f};
  Sampler s(greedy(), 5);
  EXPECT_EQ(s.sample(logits.data(), {}), 1);
}

TEST(Sampler, GreedyTiesGoToLowestId) {
  std::vector<float> logits = {0.f, 5.f, 1.f, 5.f, 5.f};
  Sampler s(greedy(), 5);
  EXPECT_EQ(s.sample(logits.data(), {}), 1);
}

TEST(Sampler, TopKOneIsGreedy) {
  std::vector<float> logits = {0.5f, 0.4f, 0.7f, 0.69f, 0.1f};
  auto p = plain(7);
  p.top_k = 1;
  Sampler s(p, 5);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits.data(), {}), 2);
}

// Top-k keeps exactly the k best (logit, lower id on ties) of a large vocabulary with many ties and
// a few NaNs, whatever order they arrive in.
TEST(Sampler, TopKKeepsTheKBestWithTiesByLowestId) {
  constexpr int kVocab = 20000, kTopK = 40;
  std::vector<float> logits(kVocab);
  for (int i = 0; i < kVocab; ++i) logits[i] = float((i * 7919) % 997) / 100.f;  // values repeat
  logits[123] = NAN;
  logits[kVocab - 1] = 50.f;
  auto p = plain(3);
  p.top_k = kTopK;
  Sampler s(p, kVocab);
  s.sample(logits.data(), {});
  std::vector<std::pair<float, int32_t>> all;
  for (int i = 0; i < kVocab; ++i) all.emplace_back(std::isnan(logits[i]) ? -INFINITY : logits[i], i);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  const auto kept = s.last_candidates();
  ASSERT_EQ(kept.size(), size_t(kTopK));
  for (int i = 0; i < kTopK; ++i) EXPECT_EQ(kept[size_t(i)].first, all[size_t(i)].second) << "rank " << i;

  // Rising logits: every token displaces one (no block of the scan is skipped); the last 40 win.
  for (int i = 0; i < kVocab; ++i) logits[i] = float(i) / 1000.f;
  s.sample(logits.data(), {});
  const auto rising = s.last_candidates();
  ASSERT_EQ(rising.size(), size_t(kTopK));
  for (int i = 0; i < kTopK; ++i) EXPECT_EQ(rising[size_t(i)].first, kVocab - 1 - i) << "rank " << i;
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(float(i)) * 2;
  Sampler a(plain(42), 100), b(plain(42), 100), c(plain(43), 100);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 64; ++i) {
    ta.push_back(a.sample(logits.data(), ta));
    tb.push_back(b.sample(logits.data(), tb));
    tc.push_back(c.sample(logits.data(), tc));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(Sampler, RandomSeedIsReported) {
  auto p = plain(0);
  p.seed.reset();
  Sampler s(p, 10);
  auto q = plain(s.seed());
  Sampler t(q, 10);
  std::vector<float> logits(10, 0.f);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits.data(), {}), t.sample(logits.data(), {}));
}

TEST(Sampler, RandomSeedFitsASignedSixtyFourBitInteger) {
  // Hosts print seeds as signed integers and refuse negative SEED values: every drawn seed must replay.
  auto p = plain(0);
  p.seed.reset();
  for (int i = 0; i < 256; ++i) EXPECT_LE(Sampler(p, 10).seed(), uint64_t(INT64_MAX));
}

TEST(Sampler, SamplesFollowSoftmax) {
  // p = softmax(log(0.7), log(0.2), log(0.1)) = 0.7 / 0.2 / 0.1
  std::vector<float> logits = {std::log(0.7f), std::log(0.2f), std::log(0.1f)};
  Sampler s(plain(3), 3);
  auto h = histogram(s, logits, 20000);
  EXPECT_NEAR(h[0] / 20000.0, 0.7, 0.02);
  EXPECT_NEAR(h[1] / 20000.0, 0.2, 0.02);
  EXPECT_NEAR(h[2] / 20000.0, 0.1, 0.02);
}

TEST(Sampler, TopPKeepsSmallestNucleus) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto p = plain(5);
  p.top_p = 0.75f;  // 0.5 + 0.3 reaches it: tokens 0 and 1 only
  Sampler s(p, 4);
  auto h = histogram(s, logits, 4000);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  EXPECT_NEAR(h[0] / 4000.0, 0.5 / 0.8, 0.03);
  ASSERT_EQ(s.last_candidates().size(), 2u);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto p = plain(5);
  p.min_p = 0.2f;  // threshold 0.1: token 3 goes
  Sampler s(p, 4);
  auto h = histogram(s, logits, 4000);
  EXPECT_EQ(h.count(3), 0u);
  EXPECT_GT(h[2], 0);
}

TEST(Sampler, LowTemperatureSharpens) {
  std::vector<float> logits = {1.f, 0.f};
  auto p = plain(9);
  p.temperature = 0.25f;  // p0 = 1/(1+e^-4) = 0.982
  Sampler s(p, 2);
  auto h = histogram(s, logits, 10000);
  EXPECT_NEAR(h[0] / 10000.0, 1 / (1 + std::exp(-4.0)), 0.01);
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
  // Token 0 (logit 2, repeated) becomes 2/4 = 0.5 < token 1's 1.0: greedy switches to token 1.
  std::vector<float> logits = {2.f, 1.f, -1.f};
  auto p = greedy();
  p.repeat_penalty = 4.f;
  Sampler s(p, 3);
  std::vector<int32_t> hist = {0};
  EXPECT_EQ(s.sample(logits.data(), hist), 1);
  // A negative logit gets more negative: -1 * 4 = -4 loses to -2 (token 0 with no history).
  std::vector<float> neg = {-2.f, -3.f, -1.f};
  std::vector<int32_t> hist2 = {2};
  EXPECT_EQ(s.sample(neg.data(), hist2), 0);
}

TEST(Sampler, FrequencyPenaltyScalesWithCountPresenceDoesNot) {
  std::vector<float> logits = {3.f, 2.5f, 0.f};
  std::vector<int32_t> hist = {0, 0, 0};  // count 3
  auto f = greedy();
  f.frequency_penalty = 0.2f;  // 3 - 0.6 = 2.4 < 2.5
  Sampler sf(f, 3);
  EXPECT_EQ(sf.sample(logits.data(), hist), 1);
  auto pr = greedy();
  pr.presence_penalty = 0.4f;  // 3 - 0.4 = 2.6 > 2.5 whatever the count
  Sampler sp(pr, 3);
  EXPECT_EQ(sp.sample(logits.data(), hist), 0);
  pr.presence_penalty = 0.6f;
  Sampler sp2(pr, 3);
  EXPECT_EQ(sp2.sample(logits.data(), hist), 1);
}

TEST(Sampler, PenaltyWindowIsLastN) {
  std::vector<float> logits = {2.f, 1.f, 0.f};
  auto p = greedy();
  p.repeat_penalty = 4.f;
  p.penalty_last_n = 2;
  Sampler s(p, 3);
  std::vector<int32_t> old = {0, 2, 2};  // token 0 is outside the last 2
  EXPECT_EQ(s.sample(logits.data(), old), 0);
  std::vector<int32_t> recent = {2, 2, 0};  // 2 / 4 = 0.5 < 1
  EXPECT_EQ(s.sample(logits.data(), recent), 1);
}

TEST(Sampler, LogitsAreNotModified) {
  std::vector<float> logits = {2.f, 1.f};
  auto before = logits;
  auto p = plain(1);
  p.repeat_penalty = 2.f;
  Sampler s(p, 2);
  std::vector<int32_t> hist = {0};
  s.sample(logits.data(), hist);
  EXPECT_EQ(logits, before);
}

TEST(Sampler, RejectsInvalidValues) {
  auto expect_bad = [](auto mutate, const char* needle) {
    SamplingParams p;
    mutate(p);
    try {
      Sampler s(p, 10);
      ADD_FAILURE() << "accepted " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_bad([](SamplingParams& p) { p.temperature = -0.1f; }, "temperature");
  expect_bad([](SamplingParams& p) { p.temperature = NAN; }, "temperature");
  expect_bad([](SamplingParams& p) { p.top_p = 0.f; }, "top_p");
  expect_bad([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p");
  expect_bad([](SamplingParams& p) { p.min_p = -0.5f; }, "min_p");
  expect_bad([](SamplingParams& p) { p.min_p = 2.f; }, "min_p");
  expect_bad([](SamplingParams& p) { p.repeat_penalty = 0.f; }, "repeat_penalty");
  expect_bad([](SamplingParams& p) { p.frequency_penalty = INFINITY; }, "frequency_penalty");
  expect_bad([](SamplingParams& p) { p.presence_penalty = NAN; }, "presence_penalty");
  expect_bad([](SamplingParams& p) { p.penalty_last_n = -2; }, "penalty_last_n");
}

}  // namespace
}  // namespace infer::engine
