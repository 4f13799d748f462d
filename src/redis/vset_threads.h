// The small pool of threads that run INFER.VSIM searches off the main thread (vset_read.cpp).
// Thread-safe. Tasks must not touch Redis except through UnblockClient.
#pragma once
#include <functional>

namespace infer::redis {

// Queues `task` for a search thread (started on first use: min(4, cores) threads, never stopped).
// Returns false, dropping the task, when kMaxQueuedSearches are already waiting: the caller then
// searches synchronously, so the queue stays bounded.
bool run_search_thread(std::function<void()> task);
// Starts the threads (OnLoad), so that no command pays for creating them.
void start_search_threads();

inline constexpr size_t kMaxQueuedSearches = 256;

}  // namespace infer::redis
