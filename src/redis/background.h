// Background threads for main-thread work that can grow with its input (tokenising long texts), so
// that no command handler holds the main thread for long (DESIGN invariant 5), in two lanes: short
// texts have a thread of their own, so that a long text being tokenised never delays them.
// Thread-safe. Tasks of one lane start in order; they must not touch Redis except through
// UnblockClient / EventLoopAddOneShot.
#pragma once
#include <cstddef>
#include <functional>

namespace infer::redis {

// Queues `task`, whose work grows with `text_bytes` (the text it tokenises), in its lane; false (and
// the task is dropped) when kMaxBackgroundTasks tasks already wait in that lane.
bool run_in_background(size_t text_bytes, std::function<void()> task);
inline constexpr size_t kMaxBackgroundTasks = 1024;
// Starts the threads (OnLoad), so that no command pays for creating them.
void start_background_threads();

// Model loads and engine teardowns (seconds each) run in a lane of their own, kModelLaneThreads
// threads, so that they never wait behind texts nor texts behind them; false (and the task is dropped)
// when kMaxModelTasks tasks already wait.
bool run_model_task(std::function<void()> task);
inline constexpr size_t kMaxModelTasks = 1024;
inline constexpr unsigned kModelLaneThreads = 2;

// Texts longer than this are tokenised off the main thread when the client may block; up to this many
// bytes cost the main thread microseconds even at the slowest encode rate measured (BM_Encode;
// docs/performance.md, Constants).
inline constexpr size_t kSyncTokenizeBytes = 256;

// Texts up to this many bytes go to the short lane (one thread): at the slowest encode rate measured
// one costs at most about 10 ms (docs/performance.md, Constants), all a short request waits for per
// task ahead of it. Longer texts share the long lane's kLongLaneThreads threads.
inline constexpr size_t kShortLaneBytes = 8 * 1024;
inline constexpr unsigned kLongLaneThreads = 2;

}  // namespace infer::redis
