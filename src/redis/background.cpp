#include "redis/background.h"

#include "redis/settings.h"
#include "redis/task_threads.h"

namespace infer::redis {

namespace {
TaskThreads& worker() {
  static TaskThreads* w = new TaskThreads(1, kMaxBackgroundTasks, thread_nice());  // never destroyed (task_threads.h)
  return *w;
}
}  // namespace

bool run_in_background(std::function<void()> task) { return worker().post(std::move(task)); }

void start_background_thread() { worker().start(); }

}  // namespace infer::redis
