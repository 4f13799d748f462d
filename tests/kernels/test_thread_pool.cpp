// ThreadPool and split_range: every index runs once per run, many runs back to back, errors reach the
// caller, and ranges tile the items exactly.
#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/thread_pool.h"

namespace infer::kernels {
namespace {

TEST(ThreadPool, RunsEachThreadIndexExactlyOncePerRun) {
  for (int n : {1, 2, 3}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    std::vector<std::atomic<int>> hits(n);
    for (int run = 0; run < 500; ++run) pool.run([&](int i) { hits[i].fetch_add(1); });
    for (int i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 500) << "threads=" << n << " index=" << i;
  }
}

TEST(ThreadPool, CallerIsWorkerZero) {
  ThreadPool pool(2);
  std::thread::id zero;
  pool.run([&](int i) {
    if (i == 0) zero = std::this_thread::get_id();
  });
  EXPECT_EQ(zero, std::this_thread::get_id());
}

TEST(ThreadPool, WakesAfterSleepingIdle) {
  ThreadPool pool(2);
  std::atomic<int> sum{0};
  pool.run([&](int i) { sum += i + 1; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // workers are asleep on the futex now
  pool.run([&](int i) { sum += i + 1; });
  EXPECT_EQ(sum.load(), 6);
}

TEST(ThreadPool, RethrowsAWorkersExceptionInTheCaller) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.run([](int i) {
    if (i == 2) throw std::runtime_error("boom");
  }),
               std::runtime_error);
  std::atomic<int> count{0};
  pool.run([&](int) { ++count; });  // still usable
  EXPECT_EQ(count.load(), 3);
}

TEST(ThreadPool, ConcurrentRunIsRejected) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run([&](int i) {
    if (i == 0) pool.run([](int) {});
  }),
               std::logic_error);
}

TEST(SplitRange, TilesItemsInGranulesDeterministically) {
  for (int64_t n : {0, 1, 15, 16, 17, 1000, 151936}) {
    for (int count : {1, 2, 3, 7}) {
      int64_t next = 0;
      for (int i = 0; i < count; ++i) {
        const Range r = split_range(n, i, count, 16);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.begin, r.end);
        if (r.end < n) {
          EXPECT_EQ(r.end % 16, 0);
        }
        next = r.end;
      }
      EXPECT_EQ(next, n);
    }
  }
  EXPECT_EQ(split_range(100, 1, 2).begin, 50);
}

}  // namespace
}  // namespace infer::kernels
