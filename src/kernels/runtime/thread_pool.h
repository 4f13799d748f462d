// One persistent pool of compute threads. The caller's thread takes part as worker 0, so a pool of N
// threads starts N-1 of its own. run() blocks until every task is done.
//
// Thread-safety: one run() at a time per pool (the engine's step loop is the only caller);
// calling it from two threads at once is a bug and is detected (throws std::logic_error).
#pragma once
#include <functional>
#include <memory>

namespace infer::kernels {

class ThreadPool {
 public:
  // n_threads >= 1; throws if the OS cannot start the threads. Workers run at niceness `nice` (0..19;
  // see set_thread_nice) so that a host process's own threads can keep priority over compute.
  explicit ThreadPool(int n_threads, int nice = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;
  // Calls fn(i) exactly once for each i in [0, size()), concurrently when threads are free, and
  // returns when all calls are done. The caller runs index 0; an index whose worker has not woken up
  // yet may be run by another thread (so fn must not wait for other indices). Work is split by the
  // callee, e.g. with split_range(); an exception from any call is rethrown here (the first one).
  void run(const std::function<void(int thread_index)>& fn);

 private:
  void stop_workers();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Sets the calling thread's niceness (Linux: per thread). Raising it needs no privilege; returns false
// when the OS refuses (e.g. lowering it without CAP_SYS_NICE).
bool set_thread_nice(int nice);

// The [begin, end) share of `n` items for thread `index` of `count`, split in contiguous chunks that
// are multiples of `granule` (except the last). Deterministic: depends only on its arguments.
struct Range { int64_t begin, end; };
Range split_range(int64_t n, int index, int count, int64_t granule = 1);

}  // namespace infer::kernels
