#include "redis/background.h"

#include "redis/task_threads.h"

namespace infer::redis {

bool run_in_background(std::function<void()> task) {
  static TaskThreads* worker = new TaskThreads(1, kMaxBackgroundTasks);  // never destroyed (task_threads.h)
  return worker->post(std::move(task));
}

}  // namespace infer::redis
