#include "redis/background.h"

#include "redis/settings.h"
#include "redis/task_threads.h"

namespace infer::redis {

namespace {
// Never destroyed (task_threads.h).
TaskThreads& short_lane() {
  static TaskThreads* w = new TaskThreads(1, kMaxBackgroundTasks, thread_nice());
  return *w;
}
TaskThreads& long_lane() {
  static TaskThreads* w = new TaskThreads(kLongLaneThreads, kMaxBackgroundTasks, thread_nice());
  return *w;
}
TaskThreads& model_lane() {
  static TaskThreads* w = new TaskThreads(kModelLaneThreads, kMaxModelTasks, thread_nice());
  return *w;
}
}  // namespace

bool run_in_background(size_t text_bytes, std::function<void()> task) {
  return (text_bytes <= kShortLaneBytes ? short_lane() : long_lane()).post(std::move(task));
}

void start_background_threads() {
  short_lane().start();
  long_lane().start();
  model_lane().start();
}

bool run_model_task(std::function<void()> task) { return model_lane().post(std::move(task)); }

}  // namespace infer::redis
