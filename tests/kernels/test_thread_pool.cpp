// ThreadPool and split_range: every index runs once per run, many runs back to back, errors reach the
// caller, and ranges tile the items exactly.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/runtime/thread_pool.h"

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

// The niceness of thread `tid` of this process, from /proc (field 19 of stat).
int nice_of(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  for (int i = 3; i <= 19; ++i) rest >> field;
  return std::stoi(field);
}

TEST(ThreadPool, WorkersRunAtTheGivenNicenessAndTheCallerKeepsItsOwn) {
  const pid_t caller = static_cast<pid_t>(::syscall(SYS_gettid));
  const int caller_nice = nice_of(caller);
  ThreadPool pool(3, 7);
  std::vector<std::atomic<pid_t>> tids(3);
  // Each index must run on a worker for the check: run until both workers have taken an index.
  std::set<pid_t> seen;
  for (int run = 0; run < 2000 && seen.size() < 2; ++run) {
    pool.run([&](int i) {
      tids[i] = static_cast<pid_t>(::syscall(SYS_gettid));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    for (int i = 1; i < 3; ++i)
      if (tids[i] != caller) seen.insert(tids[i]);
  }
  ASSERT_EQ(seen.size(), 2u);
  for (pid_t t : seen) EXPECT_EQ(nice_of(t), 7) << "worker " << t;
  EXPECT_EQ(nice_of(caller), caller_nice);
  EXPECT_THROW(ThreadPool(2, 20), std::invalid_argument);
  EXPECT_THROW(ThreadPool(2, -1), std::invalid_argument);
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
