// Persistent compute threads. A run() costs a release-store and, only for sleeping workers, a futex
// wake: workers spin for up to 50 µs after each task (a decode step issues hundreds of runs
// back to back) and then sleep on a futex so that an idle pool costs nothing.
#include "kernels/runtime/thread_pool.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace infer::kernels {

namespace {
// How long a waiter spins before sleeping: long enough to bridge the gap between two kernels of one
// decode step, short enough not to steal a shared core for long.
constexpr auto kSpin = std::chrono::microseconds(50);

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// Waits until `word` differs from `value`: spin first, then sleep. `sleepers` counts threads asleep
// on `word` so that the writer knows whether a wake syscall is needed (seq_cst on both sides).
uint32_t wait_while_equal(std::atomic<uint32_t>& word, uint32_t value, std::atomic<int>& sleepers) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    const uint32_t now = word.load(std::memory_order_acquire);
    if (now != value) return now;
    _mm_pause();
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
  }
  for (;;) {
    sleepers.fetch_add(1);
    uint32_t now = word.load();
    if (now == value) {
      futex_wait(word, value);
      now = word.load(std::memory_order_acquire);
    }
    sleepers.fetch_sub(1);
    if (now != value) return now;
  }
}
}  // namespace

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> threads;
  const std::function<void(int)>* task = nullptr;
  std::atomic<bool> stopping{false};
  std::atomic<bool> busy{false};
  std::mutex error_mutex;
  std::exception_ptr error;

  alignas(64) std::atomic<uint32_t> generation{0};  // bumped once per run()
  alignas(64) std::atomic<int> worker_sleepers{0};
  alignas(64) std::atomic<int> next_index{0};       // next unclaimed task index of the current run
  alignas(64) std::atomic<uint32_t> remaining{0};   // task indices of the current run not finished yet
  alignas(64) std::atomic<int> caller_sleepers{0};

  void call(int index) {
    try {
      (*task)(index);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }

  // Claims and runs task indices until none is left. Indices are claimed, not owned: a worker that
  // the OS has not scheduled yet never holds up a run, someone else takes its index.
  void drain() {
    for (;;) {
      const int i = next_index.fetch_add(1);
      if (i >= n_threads) return;
      call(i);
      if (remaining.fetch_sub(1) == 1 && caller_sleepers.load() > 0) futex_wake_all(remaining);
    }
  }

  void worker_loop() {
    uint32_t seen = 0;
    for (;;) {
      seen = wait_while_equal(generation, seen, worker_sleepers);
      if (stopping) return;
      drain();
    }
  }

  // A claim below n_threads always belongs to the current run: the previous run ended only once all
  // its indices were claimed, and `task`/`remaining` are published before `next_index` is reset.
  void start_workers() {
    remaining.store(static_cast<uint32_t>(n_threads));
    next_index.store(1);  // index 0 is the caller's
    generation.fetch_add(1);
    if (worker_sleepers.load() > 0) futex_wake_all(generation);
  }

  void finish_and_wait() {
    if (remaining.fetch_sub(1) == 1) return;  // the caller's own index 0 was the last
    drain();
    uint32_t left = remaining.load(std::memory_order_acquire);
    while (left != 0) left = wait_while_equal(remaining, left, caller_sleepers);
  }
};

bool set_thread_nice(int nice) {
  return setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice) == 0;
}

ThreadPool::ThreadPool(int n_threads, int nice) : impl_(std::make_unique<Impl>()) {
  if (n_threads < 1) throw std::invalid_argument("ThreadPool needs at least 1 thread");
  if (nice < 0 || nice > 19) throw std::invalid_argument("ThreadPool nice must be in 0..19");
  impl_->n_threads = n_threads;
  try {
    for (int i = 1; i < n_threads; ++i)
      impl_->threads.emplace_back([this, nice] {
        if (nice != 0) set_thread_nice(nice);  // best effort: a refusal only costs priority
        impl_->worker_loop();
      });
  } catch (...) {  // e.g. the OS refused a thread: stop the ones already started, then report
    stop_workers();
    throw;
  }
}

void ThreadPool::stop_workers() {
  impl_->stopping = true;
  impl_->generation.fetch_add(1);
  futex_wake_all(impl_->generation);
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

ThreadPool::~ThreadPool() { stop_workers(); }

int ThreadPool::size() const { return impl_->n_threads; }

void ThreadPool::run(const std::function<void(int)>& fn) {
  Impl& p = *impl_;
  if (p.busy.exchange(true, std::memory_order_acquire)) {
    throw std::logic_error("ThreadPool::run called concurrently from two threads");
  }
  p.task = &fn;
  p.error = nullptr;
  if (p.n_threads > 1) p.start_workers();
  p.call(0);
  if (p.n_threads > 1) p.finish_and_wait();
  p.task = nullptr;
  std::exception_ptr error = p.error;
  p.busy.store(false, std::memory_order_release);
  if (error) std::rethrow_exception(error);
}

Range split_range(int64_t n, int index, int count, int64_t granule) {
  if (granule < 1) granule = 1;
  const int64_t units = (n + granule - 1) / granule;
  const int64_t base = units / count, extra = units % count;
  const int64_t begin_unit = index * base + (index < extra ? index : extra);
  const int64_t end_unit = begin_unit + base + (index < extra ? 1 : 0);
  const int64_t begin = begin_unit * granule < n ? begin_unit * granule : n;
  const int64_t end = end_unit * granule < n ? end_unit * granule : n;
  return {begin, end};
}

}  // namespace infer::kernels
