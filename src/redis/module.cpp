// RedisModule_OnLoad: bind the API, read settings, register configs, commands, INFO, then load the
// models named on the loadmodule line. Everything here runs once on the main thread at load.
#include <exception>
#include <string>

#include "redis/background.h"
#include "redis/blocked_call.h"
#include "redis/commands.h"
#include "redis/module_api.h"
#include "redis/models.h"
#include "redis/semantic_cache.h"
#include "redis/settings.h"
#include "redis/stats.h"
#include "redis/stream_registry.h"
#include "redis/vset_threads.h"
#include "redis/write_queue.h"

namespace {

constexpr int kModuleVersion = 1;

int fail(RedisModuleCtx* ctx, const std::string& why) {
  infer::rm::Log(ctx, "warning", "infer: %s", why.c_str());
  return REDISMODULE_ERR;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx* ctx, RedisModuleString** argv,
                                                                        int argc) {
  using namespace infer;
  const char* missing = nullptr;
  if (!rm::bind(ctx, "infer", kModuleVersion, &missing)) {
    // The API is bound when only the name was refused (a second load of the module); else rm::Log may
    // be unbound and Redis alone reports the failed load.
    if (rm::Log)
      rm::Log(ctx, "warning", "infer: cannot load: %s (MODULE LIST shows what is loaded)", missing ? missing : "?");
    return REDISMODULE_ERR;
  }
  // Redis cannot unmap this library (it has unique symbols), so what a failed load left behind would
  // meet the next load: start from nothing, and undo the models if this load fails.
  redis::settings() = redis::Settings{};
  redis::models().clear();
  // A damaged RDB value (RESTORE payload, file, full sync) is refused by the type's rdb_load instead
  // of stopping Redis (vset_type.cpp).
  rm::SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
  try {
    if (std::string err = redis::parse_module_args(argv, argc); !err.empty()) return fail(ctx, err);
    if (redis::register_commands(ctx) != REDISMODULE_OK) return fail(ctx, "cannot register commands");
    if (redis::register_vector_commands(ctx) != REDISMODULE_OK) return fail(ctx, "cannot register vector commands");
    if (rm::RegisterInfoFunc(ctx, redis::info_callback) != REDISMODULE_OK) return fail(ctx, "cannot register INFO");
    if (redis::register_configs(ctx) != REDISMODULE_OK) return fail(ctx, "cannot load configs");
    for (const auto& [name, path, kv_type] : redis::settings().startup_models) {
      // Startup models come from the operator's command line: any path is allowed. Loading copies the
      // file (O(file size), unless WEIGHTS mmap): the server starts once the models are in memory.
      bool did_not_fit = false;
      std::string err = redis::models().load_now(name, path, kv_type, &did_not_fit);
      if (did_not_fit) {
        // The settings may have changed since the model last fitted (CONFIG SET, CONFIG REWRITE, less
        // memory): the data the server holds matters more than the model, so it starts without it.
        rm::Log(ctx, "warning", "infer: MODEL %s not loaded, the server starts without it: %s", name.c_str(),
                err.c_str());
        continue;
      }
      if (!err.empty()) {
        redis::models().clear();
        return fail(ctx, "MODEL " + name + ": " + err);
      }
      rm::Log(ctx, "notice", "infer: loaded model '%s' from %s", name.c_str(), path.c_str());
    }
    // Last, once nothing can fail: what these keep (a context of this module) must belong to a load
    // that Redis kept.
    redis::init_write_queue(ctx);
    redis::start_background_threads();
    redis::start_search_threads();
    redis::start_cache_sweep(ctx);
    // Redis keeps a failed load's event subscriptions (a freed module's callbacks): subscribe last.
    if (redis::subscribe_stream_endings(ctx) != REDISMODULE_OK)
      rm::Log(ctx, "warning", "infer: cannot subscribe to server events: streams may end without 'finish'");
    if (redis::subscribe_hand_backs(ctx) != REDISMODULE_OK)
      rm::Log(ctx, "warning", "infer: cannot subscribe to the event loop: a CLIENT UNBLOCK racing a reply may lose it");
  } catch (const std::exception& e) {
    redis::models().clear();
    return fail(ctx, e.what());
  } catch (...) {
    redis::models().clear();
    return fail(ctx, "unknown error during load");
  }
  return REDISMODULE_OK;
}
