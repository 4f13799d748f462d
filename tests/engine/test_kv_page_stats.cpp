// EngineStats::kv_pages_cached counts the pages only the prefix cache holds, so that kv_pages_used
// minus it is what requests hold: zero when idle, or there is a leak.
#include <gtest/gtest.h>

#include <future>
#include <numeric>

#include "engine_test_util.h"

using namespace infer::engine;
using namespace infer::engine::test;

TEST(KvPageStats, CachedPagesAreThoseNoRequestHolds) {
  REQUIRE_STORIES();
  auto e = Engine::create(small_options());
  Request r;
  r.prompt_ids.resize(49);
  std::iota(r.prompt_ids.begin(), r.prompt_ids.end(), 10);
  r.sampling.temperature = 0;
  r.max_tokens = 4;
  Collector first;
  submit_ok(*e, r, first);
  ASSERT_TRUE(first.wait());
  EngineStats idle = e->stats();
  EXPECT_GT(idle.kv_pages_cached, 0);
  EXPECT_EQ(idle.kv_pages_used, idle.kv_pages_cached) << "idle: every used page is the cache's alone";

  // The same prompt again, held at its third token: it reuses (and so holds) the cached pages.
  std::promise<void> checked;
  std::shared_future<void> go = checked.get_future().share();
  std::promise<void> at_third;
  Collector second;
  Callbacks cb = second.callbacks();
  int n = 0;
  cb.on_token = [&](int32_t, const std::string&, const TokenLogprobs*) {
    if (++n == 3) {
      at_third.set_value();
      go.wait();
    }
  };
  r.max_tokens = 8;
  auto held = at_third.get_future();
  ASSERT_TRUE(std::holds_alternative<Handle>(e->submit(r, cb)));
  ASSERT_EQ(held.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EngineStats busy = e->stats();
  checked.set_value();
  EXPECT_EQ(busy.running, 1);
  EXPECT_GE(busy.kv_pages_used - busy.kv_pages_cached, 4) << "the running request's 4 pages are not the cache's";
  ASSERT_TRUE(second.wait());
  EngineStats after = e->stats();
  EXPECT_EQ(after.kv_pages_used, after.kv_pages_cached);
}
