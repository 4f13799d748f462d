// Fills the API table of module_api.h by name through the server's GetApi (spec §2.1).
#include "redis/module_api.h"

namespace infer::rm {

#define INFER_RM_DEFINE(name, ret, params) ret(*name) params = nullptr;
INFER_RM_API(INFER_RM_DEFINE)
INFER_RM_API_ACL_LOG(INFER_RM_DEFINE)
#undef INFER_RM_DEFINE

bool bind(RedisModuleCtx* ctx, const char* module_name, int module_version, const char** missing) {
  // The first field of every context Redis hands a module is its RM_GetApi (spec §2.1.2).
  using GetApiFn = int (*)(const char* name, void* out_fnptr);
  auto get_api = reinterpret_cast<GetApiFn>(reinterpret_cast<void**>(ctx)[0]);
  if (!get_api) {
    *missing = "GetApi";
    return false;
  }
#define INFER_RM_LOOKUP(name, ret, params)                                     \
  if (get_api("RedisModule_" #name, reinterpret_cast<void*>(&name)) != 0) { \
    *missing = #name;                                                          \
    return false;                                                              \
  }
  INFER_RM_API(INFER_RM_LOOKUP)
  INFER_RM_API_ACL_LOG(INFER_RM_LOOKUP)
#undef INFER_RM_LOOKUP
  if (IsModuleNameBusy(module_name)) {
    *missing = "module name already in use";
    return false;
  }
  SetModuleAttribs(ctx, module_name, module_version, REDISMODULE_APIVER_1);
  return true;
}

}  // namespace infer::rm
