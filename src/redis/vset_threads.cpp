#include "redis/vset_threads.h"

#include <algorithm>
#include <thread>

#include "redis/task_threads.h"

namespace infer::redis {

bool run_search_thread(std::function<void()> task) {
  // Searches are memory-latency bound and short; a few threads are enough to keep the main thread free.
  static TaskThreads* pool =  // never destroyed (task_threads.h)
      new TaskThreads(std::clamp(std::thread::hardware_concurrency(), 1u, 4u), kMaxQueuedSearches);
  return pool->post(std::move(task));
}

}  // namespace infer::redis
