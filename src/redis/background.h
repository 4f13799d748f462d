// One background thread for main-thread work that can grow with its input (tokenising long texts),
// so that no command handler holds the main thread for long (DESIGN invariant 5).
// Thread-safe. Tasks run in order; they must not touch Redis except through UnblockClient.
#pragma once
#include <cstddef>
#include <functional>

namespace infer::redis {

// Queues `task`; false (and the task is dropped) when kMaxBackgroundTasks tasks are already waiting.
bool run_in_background(std::function<void()> task);
inline constexpr size_t kMaxBackgroundTasks = 1024;
// Starts the thread (OnLoad), so that no command pays for creating it.
void start_background_thread();

// Texts longer than this are tokenised off the main thread when the client may block; up to this many
// bytes cost the main thread microseconds even at the slowest encode rate measured (BM_Encode;
// docs/performance.md, Constants).
inline constexpr size_t kSyncTokenizeBytes = 256;

}  // namespace infer::redis
