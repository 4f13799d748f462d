// Module settings: parsed from the loadmodule arguments, then exposed (and overridable) as module
// configs `infer.*` (CONFIG GET/SET). Main thread only: OnLoad, config callbacks and command handlers
// read and write them; worker threads get copies.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "redis/module_api.h"

namespace infer::redis {

struct Settings {
  std::string model_dir;        // INFER.LOAD only opens files under it (empty: INFER.LOAD refused)
  long long threads = 0;        // compute threads per model; 0 = all cores (immutable)
  long long nice = 10;          // niceness of compute threads (models loaded later): Redis's main
                                // thread then wins a core shared with inference (0 = same priority)
  long long queue_depth = 16;   // waiting requests per model (models loaded later)
  long long max_running = 8;    // concurrent sequences per model (models loaded later)
  long long context = 2048;     // tokens per sequence (models loaded later)
  long long max_tokens = 4096;  // upper bound on MAXTOKENS
  long long default_max_tokens = 128;
  long long timeout_ms = 60000; // default TIMEOUT of INFER.GENERATE; 0 = none
  long long stream_maxlen = 10000;  // XADD MAXLEN ~ for STREAM keys
  long long max_memory = 0;     // bytes all models together may plan to hold (weights, KV pools,
                                // scratch); 0 = no cap beyond the memory available
  long long vsim_thread_threshold = 1000;  // INFER.VSIM on sets with at least this many elements runs
                                           // on a search thread (0: always, unless MULTI/Lua/NOTHREAD)
  long long max_attribute_bytes = 512 << 10;  // JSON attributes a client may set (checked on the main
                                              // thread: MainThreadBudget.VaddAndVsetattrAtTheirLargestArguments)
  long long inline_max_bytes = 8192;   // the longest text tokenised on the main thread (INFER.TOKENIZE
                                       // inside MULTI/EXEC or a script, INFER.RAG's question)
  struct StartupModel {
    std::string name, path;
    engine::KvType kv_type = engine::KvType::F16;
  };
  std::vector<StartupModel> startup_models;  // MODEL name path [KV-TYPE t]
};

Settings& settings();

// "" when the settings agree with each other, else why not (infer.default-max-tokens above
// infer.max-tokens is refused, not clamped).
std::string check_settings(const Settings& s);

// The niceness threads started by the module should take: settings().nice, or 0 when a seccomp filter
// is active (Debian's systemd unit denies setpriority and kills the process with SIGSYS; spec §0.11).
int thread_nice();

// Parses `[MODEL name path [KV-TYPE f16|q8_0|q4_0]]... [MODEL-DIR dir] [THREADS n] [NICE n] [QUEUE n] [MAX-RUNNING n] [CONTEXT n]
// [MAX-TOKENS n] [DEFAULT-MAX-TOKENS n] [MAX-MEMORY bytes] [TIMEOUT ms] [STREAM-MAXLEN n] [VSIM-THREAD-THRESHOLD n]
// [MAX-ATTRIBUTE-BYTES bytes] [INLINE-MAX-BYTES bytes]` into settings(). Returns an error message, or "".
std::string parse_module_args(RedisModuleString** argv, int argc);

// Registers the infer.* configs with the values from settings() as defaults, then LoadConfigs
// (values in redis.conf / on the command line win) and check_settings. OnLoad only. Returns
// REDISMODULE_OK/ERR (logged).
int register_configs(RedisModuleCtx* ctx);

}  // namespace infer::redis
