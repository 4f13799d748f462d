// The small pool of threads that run INFER.VSIM searches off the main thread (vset_read.cpp).
// Thread-safe. Tasks must not touch Redis except through UnblockClient.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

namespace infer::redis {

// Queues `task` for a search thread (started on first use: min(4, cores) threads, never stopped).
// Returns false, dropping the task, when kMaxQueuedSearches are already waiting: the caller then
// searches synchronously, so the queue stays bounded.
bool run_search_thread(std::function<void()> task);
// Starts the threads (OnLoad), so that no command pays for creating them.
void start_search_threads();

inline constexpr size_t kMaxQueuedSearches = 256;

// Filter work (src/vector/filter.h units) one search may use on a search thread: about 5 s of one core,
// so that no search holds a search thread without end. On the main thread the limit is
// vector::kFilterWorkLimit (~4 ms).
inline constexpr uint64_t kThreadedFilterWorkLimit = 10'000'000'000;

}  // namespace infer::redis
