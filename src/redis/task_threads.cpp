#include "redis/task_threads.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

namespace infer::redis {

void TaskThreads::start() {
  std::lock_guard<std::mutex> lock(mu_);
  start_locked();
}

void TaskThreads::start_locked() {
  if (started_) return;
  for (unsigned i = 0; i < n_threads_; ++i)
    std::thread([this] {
      if (nice_ != 0) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice_);  // best effort
      loop();
    }).detach();
  started_ = true;
}

bool TaskThreads::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tasks_.size() >= max_queued_) return false;
    start_locked();
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();  // outside the lock: the woken thread takes it at once
  return true;
}

void TaskThreads::loop() {
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
      // Tasks report their own errors; nothing may kill these threads.
    }
  }
}

}  // namespace infer::redis
