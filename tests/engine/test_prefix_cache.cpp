// The radix prefix cache through the Engine: reuse changes speed, never output (invariant 7). Tokens and
// logits are bitwise those of a cache-off engine for cold, warm full, partial and post-eviction hits,
// across turns, and under a concurrent stress on a tiny pool; every page is free after a flush.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "engine_test_util.h"

using namespace infer::engine;
using namespace infer::engine::test;

namespace {

struct Outcome {
  std::vector<int32_t> ids;
  std::vector<std::vector<float>> logits;
  int cached = 0;
  FinishReason finish = FinishReason::Error;
};

Request sampled(std::vector<int32_t> prompt, int max_tokens, uint64_t seed) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.9f;
  r.sampling.seed = seed;
  return r;
}

Outcome run(Engine& e, const Request& r) {
  Collector c;
  c.capture_steps = 1000;
  submit_ok(e, r, c);
  EXPECT_TRUE(c.wait());
  return {c.result.ids, c.logits, c.result.timings.cached_tokens, c.result.finish};
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_EQ(a.ids, b.ids) << what;
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  for (size_t s = 0; s < a.logits.size(); ++s)
    EXPECT_EQ(0, std::memcmp(a.logits[s].data(), b.logits[s].data(), a.logits[s].size() * sizeof(float)))
        << what << ": logits differ at step " << s;
}

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> p{1};
  for (int i = 1; i < n; ++i) p.push_back(int32_t(3 + (i * 31 + salt * 97) % 500));
  return p;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

EngineOptions cache_options(bool on) {
  EngineOptions o = small_options();
  o.prefix_cache = on;
  return o;
}

}  // namespace

TEST(PrefixCache, ColdWarmAndPartialHitsAreBitwiseCacheOff) {
  REQUIRE_STORIES();
  auto off = Engine::create(cache_options(false));
  auto on = Engine::create(cache_options(true));
  const auto base = tokens(49, 1);  // 3 whole pages + 1 token
  const Request full = sampled(base, 12, 5);
  const Request partial = sampled(concat(std::vector<int32_t>(base.begin(), base.begin() + 20), tokens(30, 2)), 12, 6);
  const Request page_exact = sampled(std::vector<int32_t>(base.begin(), base.begin() + 48), 12, 7);

  const Outcome ref_full = run(*off, full), ref_partial = run(*off, partial), ref_exact = run(*off, page_exact);
  EXPECT_EQ(ref_full.cached, 0);

  const Outcome cold = run(*on, full);
  EXPECT_EQ(cold.cached, 0);
  expect_same(ref_full, cold, "cold");
  const Outcome warm = run(*on, full);
  EXPECT_EQ(warm.cached, 48);  // every whole page; the last prompt token is recomputed for its logits
  expect_same(ref_full, warm, "warm full hit");
  const Outcome part = run(*on, partial);
  EXPECT_EQ(part.cached, 16);  // the first 20 tokens match: one whole page
  expect_same(ref_partial, part, "partial hit");
  const Outcome exact = run(*on, page_exact);
  EXPECT_EQ(exact.cached, 32);  // a prompt of exactly 3 pages recomputes its last page
  expect_same(ref_exact, exact, "page-aligned prompt");

  EngineStats s = on->stats();
  EXPECT_EQ(s.cache_lookups, 4u);
  EXPECT_EQ(s.cache_hits, 3u);
  EXPECT_EQ(s.cached_tokens, 96u);
  EXPECT_GT(s.kv_pages_cached, 0);
  EXPECT_EQ(s.kv_pages_used, s.kv_pages_cached);  // nothing running: every used page is the cache's
  EXPECT_TRUE(wait_pool_free(*on));
  EXPECT_TRUE(wait_pool_free(*off));
}

TEST(PrefixCache, MultiTurnReusesPromptAndAnswer) {
  REQUIRE_STORIES();
  auto off = Engine::create(cache_options(false));
  auto on = Engine::create(cache_options(true));
  Request turn1 = sampled(tokens(30, 3), 25, 11);
  turn1.sampling.temperature = 0;
  const Outcome t1 = run(*on, turn1);
  ASSERT_EQ(t1.finish, FinishReason::Length);
  // Turn 2: the whole conversation so far plus the new user tokens.
  const auto convo = concat(concat(turn1.prompt_ids, t1.ids), tokens(10, 4));
  const Request turn2 = sampled(convo, 10, 12);
  const Outcome t2 = run(*on, turn2);
  const int computed_turn1 = int(turn1.prompt_ids.size() + t1.ids.size()) - 1;  // the last token was never fed
  EXPECT_EQ(t2.cached, computed_turn1 / 16 * 16);
  EXPECT_GE(t2.cached, 48);
  expect_same(run(*off, turn2), t2, "second turn");
  EXPECT_TRUE(wait_pool_free(*on));
}

TEST(PrefixCache, HitsAfterEvictionsStayBitwiseCacheOff) {
  REQUIRE_STORIES();
  EngineOptions o = cache_options(true);
  o.max_running = 1;
  o.kv_tokens = 8 * 16;  // 8 pages: every new request must evict the older ones
  auto on = Engine::create(o);
  o.prefix_cache = false;
  auto off = Engine::create(o);
  const Request target = sampled(tokens(40, 9), 20, 3);
  const Outcome ref = run(*off, target);
  expect_same(ref, run(*on, target), "cold");
  for (int i = 0; i < 4; ++i) run(*on, sampled(tokens(60, 20 + i), 20, uint64_t(i)));
  EXPECT_GT(on->stats().cache_evictions, 0u);
  const Outcome after = run(*on, target);
  expect_same(ref, after, "after evictions");
  const Outcome warm = run(*on, target);
  EXPECT_EQ(warm.cached, 32);
  expect_same(ref, warm, "warm again");
  EXPECT_TRUE(wait_pool_free(*on));
}

TEST(PrefixCache, NeverBlocksARequestThatFitsWithoutIt) {
  REQUIRE_STORIES();
  EngineOptions o = cache_options(true);
  o.max_running = 1;
  o.kv_tokens = 4 * 16;  // exactly one 64-token request
  auto e = Engine::create(o);
  run(*e, sampled(tokens(40, 1), 24, 1));  // fills the cache with 3 pages
  EXPECT_GT(e->stats().kv_pages_cached, 0);
  const Outcome big = run(*e, sampled(tokens(40, 2), 24, 2));  // needs all 4 pages
  EXPECT_EQ(big.finish, FinishReason::Length);
  EXPECT_EQ(big.ids.size(), 24u);
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(PrefixCache, ConcurrentStressOnATinyPoolNoLeaksSameOutputs) {
  REQUIRE_STORIES();
  EngineOptions o = cache_options(true);
  o.max_running = 4;
  o.queue_depth = 64;
  o.kv_tokens = 20 * 16;
  o.step_tokens = 24;
  o.threads = 2;
  auto on = Engine::create(o);
  o.prefix_cache = false;
  o.max_running = 1;
  auto off = Engine::create(o);

  // Requests built from a few shared prefixes with random tails.
  std::mt19937 rng(42);
  std::vector<std::vector<int32_t>> prefixes{tokens(16, 1), tokens(33, 2), tokens(50, 3)};
  std::vector<Request> reqs;
  for (int i = 0; i < 40; ++i) {
    auto p = prefixes[rng() % prefixes.size()];
    p.resize(p.size() - rng() % 8);
    for (int k = int(rng() % 20); k > 0; --k) p.push_back(int32_t(3 + rng() % 500));
    reqs.push_back(sampled(p, 4 + int(rng() % 16), uint64_t(i)));
  }
  std::vector<Outcome> got(reqs.size());
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&, t] {
      for (size_t i = size_t(t); i < reqs.size(); i += 4) got[i] = run(*on, reqs[i]);
    });
  for (auto& c : clients) c.join();
  for (size_t i = 0; i < reqs.size(); ++i) expect_same(run(*off, reqs[i]), got[i], "request " + std::to_string(i));
  EngineStats s = on->stats();
  EXPECT_GT(s.cache_hits, 0u);
  EXPECT_GT(s.cache_evictions, 0u);
  EXPECT_EQ(s.errors, 0u);
  EXPECT_TRUE(wait_pool_free(*on));
  EXPECT_EQ(on->stats().kv_pages_used, 0);
}
