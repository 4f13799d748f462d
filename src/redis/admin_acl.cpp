#include "redis/admin_acl.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "redis/args.h"

namespace infer::redis {
namespace {

// Whether an ACL user is attached to the context's client. The master's link and a module's RM_Call
// run as root with none, and RM_GetCurrentUserName would dereference it. An RM_Call as the context's
// user ("C") with a malformed format tells them apart without running anything: Redis refuses it
// with ENOTSUP when no user is attached, and with EBADF (bad format) when one is.
bool has_acl_user(RedisModuleCtx* ctx) {
  if (rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_REPLICATED) return false;
  errno = 0;
  if (RedisModuleCallReply* r = rm::Call(ctx, "PING", "C?")) {  // never: the format is refused
    rm::FreeCallReply(r);
    return true;
  }
  return errno != ENOTSUP;
}

}  // namespace

bool refuse_unless_module_admin(RedisModuleCtx* ctx, const char* command) {
  if (!has_acl_user(ctx)) return false;
  RedisModuleString* name = rm::GetCurrentUserName(ctx);
  RedisModuleUser* user = rm::GetModuleUserFromUserName(name);  // null: deleted or disabled meanwhile
  bool allowed = false;
  if (user) {
    RedisModuleString* module_load[2] = {rm::CreateString(nullptr, "MODULE", 6), rm::CreateString(nullptr, "LOAD", 4)};
    allowed = rm::ACLCheckCommandPermissions(user, module_load, 2) == REDISMODULE_OK;
    if (!allowed) {
      RedisModuleString* object = rm::CreateString(nullptr, command, std::strlen(command));
      rm::ACLAddLogEntry(ctx, user, object, REDISMODULE_ACL_LOG_CMD);
      rm::FreeString(nullptr, object);
    }
    for (RedisModuleString* s : module_load) rm::FreeString(nullptr, s);
    rm::FreeModuleUser(user);
  }
  rm::FreeString(ctx, name);
  if (allowed) return false;
  reply_coded_error(ctx, "NOPERM",
                    std::string("this user has no permissions to run the '") + command +
                        "' command: it needs what MODULE LOAD needs (e.g. +@admin or +module|load)");
  return true;
}

}  // namespace infer::redis
