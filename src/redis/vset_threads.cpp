#include "redis/vset_threads.h"

#include <algorithm>
#include <thread>

#include "redis/settings.h"
#include "redis/task_threads.h"

namespace infer::redis {

namespace {
TaskThreads& search_pool() {
  // Searches are memory-latency bound and short; a few threads are enough to keep the main thread free.
  static TaskThreads* pool =  // never destroyed (task_threads.h)
      new TaskThreads(std::clamp(std::thread::hardware_concurrency(), 1u, 4u), kMaxQueuedSearches,
                                   thread_nice());
  return *pool;
}
}  // namespace

bool run_search_thread(std::function<void()> task) { return search_pool().post(std::move(task)); }

void start_search_threads() { search_pool().start(); }

}  // namespace infer::redis
