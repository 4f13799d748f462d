// A fixed set of threads running queued tasks in FIFO order: the module's background work
// (tokenising long texts, background.h) and its vector searches (vset_threads.h).
// Thread-safe. The threads start on start() or the first post and live as long as the process (instances are
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
  // The threads run at niceness `nice` (0..19), like the engines' threads: woken by a command, they
  // must not preempt Redis's main thread in the middle of it.
  TaskThreads(unsigned n_threads, size_t max_queued, int nice)
      : n_threads_(n_threads), max_queued_(max_queued), nice_(nice) {}
  TaskThreads(const TaskThreads&) = delete;
  TaskThreads& operator=(const TaskThreads&) = delete;

  // Queues `task`; false (and the task is dropped) when max_queued tasks are already waiting.
  bool post(std::function<void()> task);
  // Starts the threads now (OnLoad) rather than in the first post, which would otherwise pay for
  // creating them on the main thread inside a command.
  void start();

 private:
  void start_locked();  // mu_ held
  void loop();

  const unsigned n_threads_;
  const size_t max_queued_;
  const int nice_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool started_ = false;
};

}  // namespace infer::redis
