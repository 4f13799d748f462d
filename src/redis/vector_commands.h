// Hook through which the vector-set commands (INFER.V*, vset_*.cpp) register themselves.
// RedisModule_OnLoad calls it once, on the main thread, after the inference commands and before
// LoadConfigs; it may call CreateCommand, SetCommandInfo and CreateDataType. Returns REDISMODULE_OK
// or REDISMODULE_ERR (which fails the module load). A weak default returning OK lives in module.cpp
// so that the module links before the vector commands exist.
#pragma once
#include "redis/module_api.h"

int register_vector_commands(RedisModuleCtx* ctx);
