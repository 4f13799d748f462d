// INFER.LOAD and INFER.UNLOAD open files and spend the machine's memory, as MODULE LOAD does; Redis
// 7.0 puts module commands in no ACL category, so `+@all -@admin` would not exclude them. They check
// the caller's ACL user against MODULE LOAD themselves. Main thread (command handlers).
#pragma once
#include "redis/module_api.h"

namespace infer::redis {

// Returns true after replying -NOPERM (and adding an ACL LOG entry) when the calling ACL user could not
// run MODULE LOAD. Commands with no ACL user (from the master's link, or a module's RM_Call) pass.
bool refuse_unless_module_admin(RedisModuleCtx* ctx, const char* command);

}  // namespace infer::redis
