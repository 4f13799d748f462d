#include "redis/vset_threads.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace infer::redis {
namespace {

class SearchPool {
 public:
  bool post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (tasks_.size() >= kMaxQueuedSearches) return false;
    if (!started_) {
      // Searches are memory-latency bound and short; a few threads are enough to keep the main thread free.
      const unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
      for (unsigned i = 0; i < n; ++i) std::thread([this] { loop(); }).detach();  // live as long as the process
      started_ = true;
    }
    tasks_.push_back(std::move(task));
    cv_.notify_one();
    return true;
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !tasks_.empty(); });
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      try {
        task();
      } catch (...) {
        // Tasks report their own errors; nothing may kill this thread.
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool started_ = false;
};

}  // namespace

bool run_search_thread(std::function<void()> task) {
  static SearchPool* pool = new SearchPool;  // never destroyed: its threads may outlive static destructors
  return pool->post(std::move(task));
}

}  // namespace infer::redis
