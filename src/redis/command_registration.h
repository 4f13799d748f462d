// What command_table.cpp and vset_commands.cpp share to register their commands: the guard around
// every handler, key-spec builders and one loop that creates a command and sets its COMMAND INFO.
// OnLoad only (main thread).
#pragma once
#include <cstdint>
#include <exception>
#include <span>
#include <string>

#include "redis/args.h"
#include "redis/module_api.h"
#include "redis/stats.h"

namespace infer::redis {

// Runs a handler with its main-thread time recorded and every exception turned into -ERR. A getkeys-api
// key-position request is answered untimed: it is the server asking for keys, not a command run.
template <RedisModuleCmdFunc F, const char* Name>
int guarded(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) noexcept {
  try {
    if (rm::IsKeysPositionRequest(ctx)) return F(ctx, argv, argc);
    MainThreadTimer timer(Name);
    return F(ctx, argv, argc);
  } catch (const std::exception& e) {
    return reply_error(ctx, std::string("internal error: ") + e.what());
  } catch (...) {
    return reply_error(ctx, "internal error");
  }
}

// One key at argv[pos].
RedisModuleCommandKeySpec index_key_spec(const char* notes, uint64_t flags, int pos);
// Keys found by searching for `keyword` from argv[startfrom] (negative: from the end); lastkey as in
// the FK_RANGE spec (0: the one key after the keyword, -1: all up to the end).
RedisModuleCommandKeySpec keyword_key_spec(const char* notes, uint64_t flags, const char* keyword, int startfrom,
                                           int lastkey);

struct CommandDef {
  const char* name;
  RedisModuleCmdFunc fn;
  const char* flags;
  int arity;
  const char* summary;
  // Zero-terminated array or nullptr; must outlive the module (Redis keeps the pointer).
  RedisModuleCommandKeySpec* key_specs;
};

// Creates each command and sets its COMMAND INFO; logs and returns REDISMODULE_ERR at the first failure.
int create_commands(RedisModuleCtx* ctx, std::span<const CommandDef> commands);

}  // namespace infer::redis
