// Module-side counters and main-thread timing, reported by INFER.STATS and INFO infer.
// Threads: everything here is touched on the main thread only (handlers, reply/free/timeout
// callbacks, INFO), so plain integers suffice. Engine counters come from Engine::stats() instead;
// those of unloaded engines are kept under a mutex (retire_engine).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "engine/engine.h"

#include "redis/module_api.h"

namespace infer::redis {

struct CommandTiming {
  uint64_t calls = 0;
  uint64_t total_us = 0;
  uint64_t max_us = 0;  // longest single main-thread stall (wall clock) of this command or callback
  uint64_t max_cpu_us = 0;  // longest main-thread CPU time of one call: the module's own work, without
                            // time the thread spent preempted by other processes
};

struct ModuleStats {
  uint64_t generate_requests = 0;  // accepted by the engine
  uint64_t busy_replies = 0;       // -BUSY sent
  uint64_t timeouts = 0;           // -TIMEOUT replies (client timeout or engine deadline)
  uint64_t disconnects = 0;        // clients that left while their request ran
  uint64_t errors = 0;             // requests finished with an engine error
  uint64_t tokens_streamed = 0;    // tokens written to STREAM keys
  uint64_t stream_entries = 0;     // XADDs made for STREAM keys
  // CACHE (semantic_cache.h): requests answered from the cache, that generated after a lookup, that
  // bypassed it (TEMP > 0 without SAMPLED, LOGPROBS); entries stored; expired entries removed.
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t cache_bypassed = 0;
  uint64_t cache_stores = 0;
  uint64_t cache_expired_removed = 0;
  std::map<std::string, CommandTiming, std::less<>> timing;  // by command ("infer.generate", "... reply")
};

ModuleStats& stats();

// Times a stretch of main-thread work under `name` (a string literal).
class MainThreadTimer {
 public:
  explicit MainThreadTimer(const char* name);
  ~MainThreadTimer();
  MainThreadTimer(const MainThreadTimer&) = delete;
  MainThreadTimer& operator=(const MainThreadTimer&) = delete;

 private:
  const char* name_;
  uint64_t start_us_;
  uint64_t start_cpu_us_;
};

// INFER.UNLOAD hands the engine over here (main thread), so that its counters stay in the totals of
// INFO and INFER.STATS; engine_destroyed (any thread, before the engine is deleted) keeps its final ones.
void retire_engine(const std::shared_ptr<engine::Engine>& e);
void engine_destroyed(const engine::Engine* e);

// The INFO callback (section "infer"); cheap and safe from a crash report.
void info_callback(RedisModuleInfoCtx* ctx, int for_crash_report);

// INFER.STATS [model]
int cmd_stats(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);

}  // namespace infer::redis
