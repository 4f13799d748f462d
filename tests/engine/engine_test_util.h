// Helpers for the Engine tests: the real stories260K model, a waitable result collector, and a
// bounded wait for the pool to drain.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "support/data_dirs.h"

namespace infer::engine::test {

inline std::string stories_path() { return infer::test::models_dir() + "/stories260K.gguf"; }

#define REQUIRE_STORIES()                                                                       \
  do {                                                                                          \
    INFER_REQUIRE_DIR(infer::test::models_dir());                                               \
    ASSERT_TRUE(std::filesystem::exists(::infer::engine::test::stories_path()));                \
  } while (0)

inline EngineOptions small_options() {
  EngineOptions o;
  o.model_path = stories_path();
  o.threads = 1;
  o.max_running = 8;
  o.queue_depth = 16;
  o.context = 256;
  o.page_tokens = 16;
  o.step_tokens = 64;
  return o;
}

// Records everything one request produced; wait() bounds the time a test can hang.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int done_calls = 0;
  Result result;
  std::vector<int32_t> streamed_ids;
  std::string streamed_text;
  std::vector<std::vector<float>> logits;  // per step, when capture_steps > 0
  int capture_steps = 0;

  Callbacks callbacks() {
    Callbacks cb;
    cb.on_token = [this](int32_t id, const std::string& piece, const TokenLogprobs*) {
      std::lock_guard lk(mu);
      streamed_ids.push_back(id);
      streamed_text += piece;
    };
    cb.on_done = [this](Result&& r) {
      std::lock_guard lk(mu);
      result = std::move(r);
      done = true;
      ++done_calls;
      cv.notify_all();
    };
    if (capture_steps > 0)
      cb.on_logits = [this](int step, const float* l, int n) {
        std::lock_guard lk(mu);
        if (step < capture_steps) logits.emplace_back(l, l + n);
      };
    return cb;
  }
  bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, timeout, [&] { return done; });
  }
};

inline Handle submit_ok(Engine& e, Request r, Collector& c) {
  auto res = e.submit(std::move(r), c.callbacks());
  if (auto* err = std::get_if<SubmitError>(&res)) {
    ADD_FAILURE() << "submit refused: " << err->message;
    return {};
  }
  return std::get<Handle>(res);
}

// Waits (bounded) until nothing runs or waits and, after a flush, no KV page is in use.
inline bool wait_pool_free(Engine& e, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  e.flush_prefix_cache();
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    EngineStats s = e.stats();
    if (s.running == 0 && s.queued == 0 && s.kv_pages_used == 0 && s.kv_pages_cached == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    e.flush_prefix_cache();
  }
  return false;
}

}  // namespace infer::engine::test
