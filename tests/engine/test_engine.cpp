// Engine behaviour on the real stories260K model: generation, refusals, cancel, deadlines, stop strings,
// embeddings, shutdown. Every test ends with the KV pool fully free.
#include <gtest/gtest.h>

#include <cmath>

#include "engine_test_util.h"
#include "model/kv_pool.h"

using namespace infer::engine;
using namespace infer::engine::test;
using namespace std::chrono_literals;

namespace {
Request greedy(std::vector<int32_t> ids, int max_tokens) {
  Request r;
  r.prompt_ids = std::move(ids);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}
// llama2.c's run.c greedy continuation of "Once upon a time" (shared/models/README.md).
const std::vector<int32_t> kOnceUponATime{1, 403, 407, 261, 378};
const std::vector<int32_t> kReferenceContinuation{432, 383, 286, 261, 376, 298, 315, 421, 395, 317,
                                                  426, 338, 401, 396, 267, 337, 410, 408, 419, 292};
}  // namespace

TEST(Engine, GreedyMatchesReferenceContinuation) {
  REQUIRE_STORIES();
  auto e = Engine::create(small_options());
  Request r;
  r.prompt_text = "Once upon a time";
  r.max_tokens = int(kReferenceContinuation.size());
  r.sampling.temperature = 0;
  Collector c;
  const auto t0 = std::chrono::steady_clock::now();
  submit_ok(*e, r, c);
  ASSERT_TRUE(c.wait());
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(c.result.finish, FinishReason::Length);
  EXPECT_EQ(c.result.ids, kReferenceContinuation);
  EXPECT_EQ(c.streamed_ids, kReferenceContinuation);
  EXPECT_EQ(c.result.text.rfind(", there was a little girl named Lily.", 0), 0u) << c.result.text;
  EXPECT_EQ(c.streamed_text, c.result.text);
  EXPECT_EQ(c.result.timings.prompt_tokens, 5);
  EXPECT_EQ(c.result.timings.generated_tokens, int(kReferenceContinuation.size()));
  // The first token comes within the request's wall time, from a prefill that took some time.
  EXPECT_GT(c.result.timings.ttft_ms, 0);
  EXPECT_LE(c.result.timings.ttft_ms, wall_ms);
  EXPECT_EQ(c.done_calls, 1);
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Engine, CountsDecodeStepsAlwaysAndProfilesTheirPhasesWhenAsked) {
  REQUIRE_STORIES();
  auto generate = [](bool profile) {
    EngineOptions o = small_options();
    o.profile = profile;
    auto e = Engine::create(o);
    Collector a, b;
    const auto t0 = std::chrono::steady_clock::now();
    submit_ok(*e, greedy(kOnceUponATime, 12), a);
    submit_ok(*e, greedy({1, 385, 410}, 12), b);
    EXPECT_TRUE(a.wait() && b.wait());
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(a.result.ids.size(), 12u);
    EXPECT_TRUE(wait_pool_free(*e));
    return std::make_pair(e->stats().decode_profile, wall_s);
  };
  const auto [p, wall_s] = generate(true);
  // Each request's first token comes from its prefill step, its other 11 from decode rows: 22 rows in all.
  // When b is admitted a step after a, b's prefill step also carries one of a's decode rows and is not
  // decode-only, so 21 or 22 rows are profiled, in 11 to 22 steps of one or two rows.
  EXPECT_GE(p.steps, 11u);
  EXPECT_LE(p.steps, 22u);
  EXPECT_GE(p.rows, 21u);
  EXPECT_LE(p.rows, 22u);
  EXPECT_GE(p.rows, p.steps);
  EXPECT_LE(p.rows, 2 * p.steps);
  // Every phase ran in the profiled steps and took time; together they are the steps' wall time,
  // within the requests'.
  for (const double phase_s : {p.forward.qkv_s, p.forward.attention_s, p.forward.ffn_down_s, p.forward.classifier_s,
                               p.after_pass_s}) {
    EXPECT_GT(phase_s, 0);
    EXPECT_LT(phase_s, wall_s);
  }
  EXPECT_LE(p.forward.total_s() + p.after_pass_s, p.wall_s);
  EXPECT_LT(p.wall_s, wall_s);

  // Without the profile the steps, their rows and wall time are still counted (the decode rate), the
  // phases are not.
  const auto [off, off_wall_s] = generate(false);
  EXPECT_GE(off.steps, 11u);
  EXPECT_LE(off.steps, 22u);
  EXPECT_GE(off.rows, 21u);
  EXPECT_LE(off.rows, 22u);
  EXPECT_GT(off.wall_s, 0);
  EXPECT_LT(off.wall_s, off_wall_s);
  EXPECT_EQ(off.forward.total_s(), 0);
  EXPECT_EQ(off.after_pass_s, 0);
}

TEST(Engine, ReportsResolvedPlan) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.context = 100000;  // capped at the model's 2048
  o.kv_tokens = 1000;  // rounded up to whole pages
  auto e = Engine::create(o);
  EXPECT_EQ(e->options().context, 2048);
  EXPECT_EQ(e->options().kv_tokens, 1008);
  EngineStats s = e->stats();
  EXPECT_EQ(s.kv_pages_total, 63);
  EXPECT_EQ(s.kv_page_tokens, 16);
  EXPECT_EQ(s.max_seq_tokens, 2048);
  // pages × (tokens × layers × K,V × kv_dim + the page pad) × F16
  EXPECT_EQ(s.kv_bytes, 63ull * (16 * 5 * 2 * 32 + infer::model::KvPool::kPagePadHalves) * 2);
  EXPECT_GT(s.model_bytes, 1000000u);
  EXPECT_EQ(s.kv_bytes_per_token, 5u * 2 * 32 * 2);  // layers × K,V × kv_dim × F16

  o.kv_tokens = 0;
  o.kv_bytes = 100 * (16 * 640 + 320);  // 640 bytes/token, 320 bytes of pad per page: 100 pages
  EXPECT_EQ(Engine::create(o)->stats().kv_pages_total, 100);
  o.kv_bytes -= 1;  // never over the budget
  EXPECT_EQ(Engine::create(o)->stats().kv_pages_total, 99);
  o.kv_bytes = 100;  // not even one token
  EXPECT_THROW(Engine::create(o), std::invalid_argument);

  // Neither set: room for max_running sequences of the full context, each in whole pages (121 tokens
  // take 8 pages; 8 × 121 tokens would have been 61 pages, and the eighth sequence would wait).
  o.kv_bytes = 0;
  o.context = 121;
  o.max_running = 8;
  auto planned = Engine::create(o);
  EXPECT_EQ(planned->stats().kv_pages_total, 64);
  EXPECT_EQ(planned->options().kv_tokens, 1024);
}

TEST(Engine, CreateFailsClearlyForMissingModelAndBadOptions) {
  EngineOptions o = small_options();
  o.model_path = "/nonexistent/model.gguf";
  EXPECT_THROW(Engine::create(o), std::exception);
  REQUIRE_STORIES();
  o = small_options();
  o.max_running = 0;
  EXPECT_THROW(Engine::create(o), std::invalid_argument);
}

TEST(Engine, RefusesPromptsThatCanNeverFit) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.context = 64;
  o.kv_tokens = 32;
  auto e = Engine::create(o);
  Collector c;
  auto too_long = e->submit(greedy(std::vector<int32_t>(64, 5), 4), c.callbacks());
  ASSERT_TRUE(std::holds_alternative<SubmitError>(too_long));
  EXPECT_EQ(std::get<SubmitError>(too_long).kind, SubmitError::Kind::Invalid);
  auto pool_too_small = e->submit(greedy(std::vector<int32_t>(30, 5), 10), c.callbacks());
  ASSERT_TRUE(std::holds_alternative<SubmitError>(pool_too_small));
  EXPECT_NE(std::get<SubmitError>(pool_too_small).message.find("KV pages"), std::string::npos);
  auto bad_id = e->submit(greedy({1, 99999}, 4), c.callbacks());
  ASSERT_TRUE(std::holds_alternative<SubmitError>(bad_id));
  Request bad_sampling = greedy({1, 2}, 4);
  bad_sampling.sampling.top_p = 2;
  EXPECT_TRUE(std::holds_alternative<SubmitError>(e->submit(bad_sampling, c.callbacks())));
  EXPECT_TRUE(std::holds_alternative<SubmitError>(e->submit(Request{}, c.callbacks())));
  // A text whose length alone shows it cannot fit is refused untokenised (stories: at most 9 bytes a
  // token, so 64 MB would take seconds to tokenise), in the words of the exact refusal.
  Request huge = greedy({}, 4);
  huge.prompt_text.assign(64u << 20, 'a');
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = e->submit(std::move(huge), c.callbacks());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  ASSERT_TRUE(std::holds_alternative<SubmitError>(refused));
  EXPECT_EQ(std::get<SubmitError>(refused).message,
            "prompt of at least 7456540 tokens does not fit the context of 64 tokens with room to generate");
  EXPECT_EQ(e->refuse_prompt_text(std::string(100, 'a'), false), "");
  // Too short for that bound but too long for the context: tokenising stops at the first special token
  // past the 63 tokens the context allows, and the refusal says "at least".
  Request stopped = greedy({}, 4);
  for (int i = 0; i < 25; ++i) stopped.prompt_text += "Once upon a time</s>";
  EXPECT_EQ(e->refuse_prompt_text(stopped.prompt_text, false), "");
  auto stopped_early = e->submit(std::move(stopped), c.callbacks());
  ASSERT_TRUE(std::holds_alternative<SubmitError>(stopped_early));
  EXPECT_EQ(std::get<SubmitError>(stopped_early).message,
            "prompt of at least 65 tokens does not fit the context of 64 tokens with room to generate");
  EXPECT_FALSE(c.done);  // refused requests never call back
}

TEST(Engine, BusyWhenQueueFull) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.max_running = 1;
  o.queue_depth = 2;
  auto e = Engine::create(o);
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<Handle> hs;
  int busy = 0;
  for (int i = 0; i < 6; ++i) {
    cs.push_back(std::make_unique<Collector>());
    auto t0 = std::chrono::steady_clock::now();
    auto res = e->submit(greedy({1, 403}, 200), cs.back()->callbacks());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
    if (auto* err = std::get_if<SubmitError>(&res)) {
      EXPECT_EQ(err->kind, SubmitError::Kind::Busy);
      // An estimate from the service times so far, within the scheduler's bounds (100 before any).
      EXPECT_GE(err->retry_after_ms, 10);
      EXPECT_LE(err->retry_after_ms, 30000);
      ++busy;
      cs.back()->done = true;
    } else {
      hs.push_back(std::get<Handle>(res));
    }
  }
  // One running plus two queued at most (the first may not be admitted yet when the rest arrive).
  EXPECT_GE(busy, 3);
  EXPECT_EQ(e->stats().rejected_busy, uint64_t(busy));
  for (auto& h : hs) h.cancel();
  for (auto& c : cs) ASSERT_TRUE(c->wait());
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Engine, CancelFinishesWithCancelledAndFreesPages) {
  REQUIRE_STORIES();
  auto e = Engine::create(small_options());
  Collector c;
  std::atomic<int> tokens{0};
  std::mutex handle_mu;  // the handle is published after submit returns, while tokens may flow
  Handle h;
  Callbacks cb = c.callbacks();
  cb.on_token = [&](int32_t, const std::string&, const TokenLogprobs*) {
    std::lock_guard lk(handle_mu);
    if (++tokens >= 3 && h) h.cancel();  // cancel from inside a callback is allowed
  };
  auto res = e->submit(greedy(kOnceUponATime, 200), cb);
  {
    std::lock_guard lk(handle_mu);
    h = std::get<Handle>(res);
  }
  ASSERT_TRUE(c.wait());
  EXPECT_EQ(c.result.finish, FinishReason::Cancelled);
  EXPECT_LT(c.result.ids.size(), 200u);
  EXPECT_EQ(e->stats().cancelled, 1u);
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Engine, DeadlineWhileQueuedAndWhileRunning) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.max_running = 1;
  auto e = Engine::create(o);
  Collector running, queued;
  Request long_one = greedy({1}, 250);
  long_one.deadline = std::chrono::steady_clock::now() + 30ms;
  Callbacks slow = running.callbacks();
  // ≥ 0.5 s in all
  slow.on_token = [](int32_t, const std::string&, const TokenLogprobs*) { std::this_thread::sleep_for(2ms); };
  ASSERT_TRUE(std::holds_alternative<Handle>(e->submit(long_one, slow)));
  Request waiting = greedy({1, 2}, 4);
  waiting.deadline = std::chrono::steady_clock::now() + 10ms;  // expires behind the long one
  submit_ok(*e, waiting, queued);
  ASSERT_TRUE(running.wait());
  ASSERT_TRUE(queued.wait());
  EXPECT_EQ(running.result.finish, FinishReason::Deadline);
  EXPECT_FALSE(running.result.ids.empty());
  EXPECT_LT(running.result.ids.size(), 250u);
  EXPECT_EQ(queued.result.finish, FinishReason::Deadline);
  EXPECT_TRUE(queued.result.ids.empty());
  Collector expired;
  Request past = greedy({1, 2}, 4);
  past.deadline = std::chrono::steady_clock::now() - 1ms;
  submit_ok(*e, past, expired);
  ASSERT_TRUE(expired.wait());
  EXPECT_EQ(expired.result.finish, FinishReason::Deadline);
  EXPECT_EQ(e->stats().timeouts, 3u);
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Engine, CancelWhileQueued) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.max_running = 1;
  auto e = Engine::create(o);
  Collector first, second;
  Callbacks slow = first.callbacks();
  slow.on_token = [](int32_t, const std::string&, const TokenLogprobs*) { std::this_thread::sleep_for(1ms); };
  auto h1 = std::get<Handle>(e->submit(greedy({1}, 100), slow));
  Handle h2 = submit_ok(*e, greedy({1, 2}, 4), second);
  EXPECT_NE(h1.id(), h2.id());
  h2.cancel();
  h2.cancel();  // idempotent
  ASSERT_TRUE(second.wait());
  EXPECT_EQ(second.result.finish, FinishReason::Cancelled);
  EXPECT_TRUE(second.result.ids.empty());
  h1.cancel();
  ASSERT_TRUE(first.wait());
  EXPECT_EQ(second.done_calls, 1);
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Engine, HigherPriorityIsAdmittedFirst) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.max_running = 1;
  auto e = Engine::create(o);
  Collector blocker, low, high;
  std::mutex order_mu;
  std::vector<char> order;
  Callbacks slow = blocker.callbacks();
  slow.on_token = [](int32_t, const std::string&, const TokenLogprobs*) { std::this_thread::sleep_for(1ms); };
  ASSERT_TRUE(std::holds_alternative<Handle>(e->submit(greedy({1}, 30), slow)));
  auto tagged = [&](Collector& c, char tag) {
    Callbacks cb = c.callbacks();
    auto done = cb.on_done;
    cb.on_done = [&, done, tag](Result&& r) {
      {
        std::lock_guard lk(order_mu);
        order.push_back(tag);
      }
      done(std::move(r));
    };
    return cb;
  };
  Request lo = greedy({1, 5}, 3), hi = greedy({1, 6}, 3);
  hi.priority = 5;
  ASSERT_TRUE(std::holds_alternative<Handle>(e->submit(lo, tagged(low, 'l'))));
  ASSERT_TRUE(std::holds_alternative<Handle>(e->submit(hi, tagged(high, 'h'))));
  ASSERT_TRUE(low.wait());
  ASSERT_TRUE(high.wait());
  ASSERT_TRUE(blocker.wait());
  EXPECT_EQ(order, (std::vector<char>{'h', 'l'}));
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Engine, ThrowingCallbackEndsOnlyThatRequestWithError) {
  REQUIRE_STORIES();
  auto e = Engine::create(small_options());
  Collector bad, good;
  Callbacks cb = bad.callbacks();
  cb.on_token = [](int32_t, const std::string&, const TokenLogprobs*) {
    throw std::runtime_error("client went away");
  };
  ASSERT_TRUE(std::holds_alternative<Handle>(e->submit(greedy(kOnceUponATime, 20), cb)));
  submit_ok(*e, greedy(kOnceUponATime, 20), good);
  ASSERT_TRUE(bad.wait());
  ASSERT_TRUE(good.wait());
  EXPECT_EQ(bad.result.finish, FinishReason::Error);
  EXPECT_NE(bad.result.error.find("client went away"), std::string::npos);
  EXPECT_EQ(good.result.ids, kReferenceContinuation);
  EXPECT_EQ(e->stats().errors, 1u);
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Engine, StopStringEndsTextBeforeIt) {
  REQUIRE_STORIES();
  auto e = Engine::create(small_options());
  Request r = greedy(kOnceUponATime, 40);
  r.stop = {"little girl"};
  Collector c;
  submit_ok(*e, r, c);
  ASSERT_TRUE(c.wait());
  EXPECT_EQ(c.result.finish, FinishReason::Stop);
  EXPECT_EQ(c.result.text, ", there was a ");
  EXPECT_EQ(c.streamed_text, c.result.text);
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Engine, EmbeddingIsUnitLengthAndDeterministic) {
  REQUIRE_STORIES();
  auto e = Engine::create(small_options());
  Request r;
  r.prompt_ids = kOnceUponATime;
  r.embedding = true;
  Collector a, b;
  submit_ok(*e, r, a);
  submit_ok(*e, r, b);
  ASSERT_TRUE(a.wait());
  ASSERT_TRUE(b.wait());
  ASSERT_EQ(a.result.embedding.size(), size_t(e->n_embd()));
  double n2 = 0;
  for (float x : a.result.embedding) n2 += double(x) * x;
  EXPECT_NEAR(n2, 1.0, 1e-4);
  EXPECT_EQ(a.result.embedding, b.result.embedding);
  EXPECT_TRUE(a.result.ids.empty());
  EXPECT_TRUE(wait_pool_free(*e));
}

TEST(Engine, DestructorCancelsEverythingExactlyOnce) {
  REQUIRE_STORIES();
  std::vector<std::unique_ptr<Collector>> cs;
  {
    EngineOptions o = small_options();
    o.max_running = 2;
    auto e = Engine::create(o);
    for (int i = 0; i < 6; ++i) {
      cs.push_back(std::make_unique<Collector>());
      submit_ok(*e, greedy({1, int32_t(300 + i)}, 250), *cs.back());
    }
  }
  for (auto& c : cs) {
    ASSERT_TRUE(c->done);
    EXPECT_EQ(c->done_calls, 1);
  }
}

TEST(Engine, SeveralEnginesInOneProcess) {
  REQUIRE_STORIES();
  auto a = Engine::create(small_options());
  auto b = Engine::create(small_options());
  Collector ca, cb;
  submit_ok(*a, greedy(kOnceUponATime, 10), ca);
  submit_ok(*b, greedy(kOnceUponATime, 10), cb);
  ASSERT_TRUE(ca.wait());
  ASSERT_TRUE(cb.wait());
  EXPECT_EQ(ca.result.ids, cb.result.ids);
}
