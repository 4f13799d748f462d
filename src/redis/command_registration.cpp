#include "redis/command_registration.h"

#include "redis/command_docs.h"
#include "redis/command_syntax.h"

namespace infer::redis {
namespace {

const RedisModuleCommandInfoVersion kInfoVersion = {1, sizeof(RedisModuleCommandHistoryEntry),
                                                    sizeof(RedisModuleCommandKeySpec), sizeof(RedisModuleCommandArg)};

RedisModuleCommandKeySpec one_range_spec(const char* notes, uint64_t flags, int lastkey) {
  RedisModuleCommandKeySpec s{};
  s.notes = notes;
  s.flags = flags;
  s.find_keys_type = REDISMODULE_KSPEC_FK_RANGE;
  s.fk.range.lastkey = lastkey;
  s.fk.range.keystep = 1;
  s.fk.range.limit = 0;
  return s;
}

}  // namespace

RedisModuleCommandKeySpec index_key_spec(const char* notes, uint64_t flags, int pos) {
  RedisModuleCommandKeySpec s = one_range_spec(notes, flags, 0);
  s.begin_search_type = REDISMODULE_KSPEC_BS_INDEX;
  s.bs.index.pos = pos;
  return s;
}

RedisModuleCommandKeySpec keyword_key_spec(const char* notes, uint64_t flags, const char* keyword, int startfrom,
                                           int lastkey) {
  RedisModuleCommandKeySpec s = one_range_spec(notes, flags, lastkey);
  s.begin_search_type = REDISMODULE_KSPEC_BS_KEYWORD;
  s.bs.keyword.keyword = keyword;
  s.bs.keyword.startfrom = startfrom;
  return s;
}

int create_commands(RedisModuleCtx* ctx, std::span<const CommandDef> commands) {
  for (const CommandDef& c : commands) {
    if (rm::CreateCommand(ctx, c.name, c.fn, c.flags, 0, 0, 0) != REDISMODULE_OK) {
      rm::Log(ctx, "warning", "infer: CreateCommand %s failed", c.name);
      return REDISMODULE_ERR;
    }
    RedisModuleCommandInfo info{};
    info.version = &kInfoVersion;
    info.summary = c.summary;
    info.since = "0.1.0";
    info.arity = c.arity;
    info.key_specs = c.key_specs;
    if (const CommandDoc* doc = find_command_doc(c.name)) {
      info.complexity = doc->complexity;
      try {
        info.args = parse_command_syntax(doc->syntax);
      } catch (const std::invalid_argument& e) {
        rm::Log(ctx, "warning", "infer: %s: %s", c.name, e.what());
        return REDISMODULE_ERR;
      }
    }
    if (rm::SetCommandInfo(rm::GetCommand(ctx, c.name), &info) != REDISMODULE_OK) {
      rm::Log(ctx, "warning", "infer: SetCommandInfo %s failed", c.name);
      return REDISMODULE_ERR;
    }
  }
  return REDISMODULE_OK;
}

}  // namespace infer::redis
