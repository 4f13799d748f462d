#include "redis/background.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace infer::redis {
namespace {

constexpr size_t kMaxQueued = 1024;

class Worker {
 public:
  bool post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (tasks_.size() >= kMaxQueued) return false;
    if (!started_) {
      std::thread([this] { loop(); }).detach();  // lives as long as the process
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

bool run_in_background(std::function<void()> task) {
  static Worker* worker = new Worker;  // never destroyed: its thread may outlive static destructors
  return worker->post(std::move(task));
}

}  // namespace infer::redis
