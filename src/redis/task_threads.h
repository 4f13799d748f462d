// A fixed set of threads running queued tasks in FIFO order: the module's background work
// (tokenising long texts, background.h) and its vector searches (vset_threads.h).
// Thread-safe. The threads start on the first post and live as long as the process (instances are
// never destroyed: the threads may outlive static destructors). Tasks must not touch Redis except
// through UnblockClient / EventLoopAddOneShot.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace infer::redis {

class TaskThreads {
 public:
  TaskThreads(unsigned n_threads, size_t max_queued) : n_threads_(n_threads), max_queued_(max_queued) {}
  TaskThreads(const TaskThreads&) = delete;
  TaskThreads& operator=(const TaskThreads&) = delete;

  // Queues `task`; false (and the task is dropped) when max_queued tasks are already waiting.
  bool post(std::function<void()> task);

 private:
  void loop();

  const unsigned n_threads_;
  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool started_ = false;
};

}  // namespace infer::redis
