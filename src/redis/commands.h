// The INFER.* command handlers (one file each, cmd_*.cpp) and their registration (command_table.cpp).
// Handlers run on the main thread holding the global lock; command_table.cpp wraps each one so that no
// C++ exception reaches Redis and its main-thread time is recorded (stats.h).
#pragma once
#include "redis/module_api.h"

namespace infer::redis {

// Create the INFER.* commands with their flags, arity and key specs: the model, token, EMBED and RAG
// commands (command_table.cpp), and the vector-set data type with INFER.V* (vset_commands.cpp).
// OnLoad only; REDISMODULE_ERR fails the load.
int register_commands(RedisModuleCtx* ctx);
int register_vector_commands(RedisModuleCtx* ctx);

int cmd_load(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);        // cmd_load.cpp
int cmd_unload(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);      // cmd_models.cpp
int cmd_models(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);      // cmd_models.cpp
int cmd_info(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);        // cmd_models.cpp
int cmd_tokenize(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);    // cmd_tokenize.cpp
int cmd_detokenize(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);  // cmd_detokenize.cpp
int cmd_generate(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);    // cmd_generate.cpp
int cmd_embed(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);       // cmd_embed.cpp
int cmd_rag(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);         // cmd_rag.cpp

}  // namespace infer::redis
