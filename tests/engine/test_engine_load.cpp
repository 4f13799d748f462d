// Load: 64 client threads against an engine with 8 slots and a queue of 16 on a tiny synthetic model.
// Every submit answers at once (accepted or Busy), every accepted request finishes exactly once, and
// the queue and the KV pool are empty at the end. Bounded: the whole test has a hard time limit.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "engine_test_util.h"

using namespace infer::engine;
using namespace infer::engine::test;
using namespace std::chrono_literals;

TEST(EngineLoad, SixtyFourClientsEightSlotsQueueSixteen) {
  REQUIRE_STORIES();
  std::string model = infer::test::reference_dir() + "/models/tiny-llama-q4_0.gguf";
  if (!std::filesystem::exists(model)) model = stories_path();
  EngineOptions o = small_options();
  o.model_path = model;
  o.threads = 2;
  o.max_running = 8;
  o.queue_depth = 16;
  o.step_tokens = 32;
  auto e = Engine::create(o);

  constexpr int kClients = 64;
  std::atomic<int> accepted{0}, busy{0}, slow_submits{0};
  std::vector<std::unique_ptr<Collector>> collectors(kClients * 3);
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng{uint32_t(t)};
      for (int attempt = 0; attempt < 3; ++attempt) {
        auto& c = collectors[size_t(t * 3 + attempt)];
        c = std::make_unique<Collector>();
        Request r;
        r.prompt_ids = {1};
        for (int i = 0; i < 4 + int(rng() % 40); ++i) r.prompt_ids.push_back(int32_t(3 + rng() % 500));
        r.max_tokens = 4 + int(rng() % 12);
        r.sampling.seed = uint64_t(t);
        if (t % 7 == 0) r.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(rng() % 20);
        const auto t0 = std::chrono::steady_clock::now();
        auto res = e->submit(std::move(r), c->callbacks());
        if (std::chrono::steady_clock::now() - t0 > 250ms) ++slow_submits;
        if (auto* err = std::get_if<SubmitError>(&res)) {
          EXPECT_EQ(err->kind, SubmitError::Kind::Busy) << err->message;
          EXPECT_GT(err->retry_after_ms, 0);
          ++busy;
          c->done = true;
          c->done_calls = 1;
          std::this_thread::sleep_for(std::chrono::milliseconds(std::min(err->retry_after_ms, 20)));
          continue;
        }
        ++accepted;
        Handle h = std::get<Handle>(res);
        if (t % 5 == 0) h.cancel();
        EXPECT_TRUE(c->wait(60s)) << "request of client " << t << " never finished";
        break;
      }
    });
  }
  for (auto& th : clients) th.join();
  EXPECT_EQ(slow_submits.load(), 0);
  EXPECT_GT(accepted.load(), 16);
  uint64_t finished = 0;
  for (auto& c : collectors) {
    if (!c) continue;
    EXPECT_EQ(c->done_calls, 1);
    finished += c->done_calls;
  }
  EXPECT_EQ(finished, uint64_t(accepted + busy));
  EngineStats s = e->stats();
  EXPECT_EQ(s.completed + s.cancelled + s.timeouts, uint64_t(accepted.load()));
  EXPECT_EQ(s.errors, 0u);
  EXPECT_EQ(s.rejected_busy, uint64_t(busy.load()));
  EXPECT_TRUE(wait_pool_free(*e));
  EXPECT_EQ(e->stats().queued, 0);
}
