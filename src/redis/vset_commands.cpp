// register_vector_commands (redis/vector_commands.h): the "infervset" data type and the INFER.V*,
// INFER.EMBED and INFER.RAG commands with their flags, arity and exact key specs (spec §0.4, §6).
#include <exception>
#include <string>

#include "redis/args.h"
#include "redis/stats.h"
#include "redis/vector_commands.h"
#include "redis/vset_handlers.h"
#include "redis/vset_type.h"

namespace infer::redis {
namespace {

// Runs a handler with its main-thread time recorded and every exception turned into -ERR.
template <RedisModuleCmdFunc F, const char* Name>
int guarded(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) noexcept {
  try {
    MainThreadTimer timer(Name);
    return F(ctx, argv, argc);
  } catch (const std::exception& e) {
    return reply_error(ctx, std::string("internal error: ") + e.what());
  } catch (...) {
    return reply_error(ctx, "internal error");
  }
}

constexpr char kVadd[] = "infer.vadd";
constexpr char kVrem[] = "infer.vrem";
constexpr char kVsetattr[] = "infer.vsetattr";
constexpr char kVsim[] = "infer.vsim";
constexpr char kVemb[] = "infer.vemb";
constexpr char kVcard[] = "infer.vcard";
constexpr char kVdim[] = "infer.vdim";
constexpr char kVinfo[] = "infer.vinfo";
constexpr char kVgetattr[] = "infer.vgetattr";
constexpr char kEmbed[] = "infer.embed";
constexpr char kRag[] = "infer.rag";

const RedisModuleCommandInfoVersion kInfoVersion = {1, sizeof(RedisModuleCommandHistoryEntry),
                                                    sizeof(RedisModuleCommandKeySpec), sizeof(RedisModuleCommandArg)};

// One key at argv[pos]; the arrays keep a zeroed terminator.
struct Specs {
  RedisModuleCommandKeySpec s[2]{};
};

Specs at_index(int pos, uint64_t flags, const char* notes) {
  Specs sp;
  auto& s = sp.s[0];
  s.notes = notes;
  s.flags = flags;
  s.begin_search_type = REDISMODULE_KSPEC_BS_INDEX;
  s.bs.index.pos = pos;
  s.find_keys_type = REDISMODULE_KSPEC_FK_RANGE;
  s.fk.range.lastkey = 0;
  s.fk.range.keystep = 1;
  s.fk.range.limit = 0;
  return sp;
}

Specs after_keyword(const char* keyword, int startfrom, uint64_t flags, const char* notes) {
  Specs sp;
  auto& s = sp.s[0];
  s.notes = notes;
  s.flags = flags;
  s.begin_search_type = REDISMODULE_KSPEC_BS_KEYWORD;
  s.bs.keyword.keyword = keyword;
  s.bs.keyword.startfrom = startfrom;
  s.find_keys_type = REDISMODULE_KSPEC_FK_RANGE;
  s.fk.range.lastkey = 0;
  s.fk.range.keystep = 1;
  s.fk.range.limit = 0;
  return sp;
}

constexpr uint64_t RO = REDISMODULE_CMD_KEY_RO, RW = REDISMODULE_CMD_KEY_RW, ACCESS = REDISMODULE_CMD_KEY_ACCESS,
                   UPDATE = REDISMODULE_CMD_KEY_UPDATE,
                   DELETE = REDISMODULE_CMD_KEY_DELETE;

// Static: the key-spec arrays stay valid for as long as Redis might look at them.
Specs g_specs[11];

struct Command {
  const char* name;
  RedisModuleCmdFunc fn;
  const char* flags;
  int arity;
  const char* summary;
  Specs* specs;
};

}  // namespace
}  // namespace infer::redis

int register_vector_commands(RedisModuleCtx* ctx) {
  using namespace infer::redis;
  if (register_vset_type(ctx) != REDISMODULE_OK) {
    infer::rm::Log(ctx, "warning", "infer: cannot create the infervset data type");
    return REDISMODULE_ERR;
  }
  g_specs[0] = at_index(1, RW | UPDATE, "vector set");
  g_specs[1] = at_index(1, RW | DELETE, "vector set");
  g_specs[2] = at_index(1, RW | UPDATE, "vector set");
  g_specs[3] = at_index(1, RO | ACCESS, "vector set");
  g_specs[4] = at_index(1, RO, "vector set (metadata only)");
  // STORE is searched from argv[3] so that the model name or text is never taken for the keyword.
  g_specs[5] = after_keyword("STORE", 3, RW | UPDATE, "vector set the embedding is added to");
  g_specs[6] = at_index(2, RO | ACCESS, "vector set searched; document keys found through it are ACL-checked");

  const Command commands[] = {
      {"infer.vadd", guarded<cmd_vadd, kVadd>, "write deny-oom", -5, "Add or update an element of a vector set",
       &g_specs[0]},
      {"infer.vrem", guarded<cmd_vrem, kVrem>, "write", 3, "Remove an element from a vector set", &g_specs[1]},
      {"infer.vsetattr", guarded<cmd_vsetattr, kVsetattr>, "write deny-oom fast", 4,
       "Set or remove the JSON attributes of an element", &g_specs[2]},
      {"infer.vsim", guarded<cmd_vsim, kVsim>, "readonly", -4, "Elements most similar to a vector or element",
       &g_specs[3]},
      {"infer.vemb", guarded<cmd_vemb, kVemb>, "readonly fast", -3, "The vector of an element", &g_specs[3]},
      {"infer.vgetattr", guarded<cmd_vgetattr, kVgetattr>, "readonly fast", 3, "The JSON attributes of an element",
       &g_specs[3]},
      {"infer.vcard", guarded<cmd_vcard, kVcard>, "readonly fast", 2, "Number of elements", &g_specs[4]},
      {"infer.vdim", guarded<cmd_vdim, kVdim>, "readonly fast", 2, "Vector dimension", &g_specs[4]},
      {"infer.vinfo", guarded<cmd_vinfo, kVinfo>, "readonly fast", 2, "Parameters of a vector set", &g_specs[4]},
      {"infer.embed", guarded<cmd_embed, kEmbed>, "write deny-oom deny-script", -3,
       "Embed text with a loaded model, optionally adding it to a vector set (blocks only the caller)",
       &g_specs[5]},
      {"infer.rag", guarded<cmd_rag, kRag>, "readonly deny-oom deny-script", -5,
       "Retrieve documents from a vector set and generate an answer from them (blocks only the caller)",
       &g_specs[6]},
  };
  for (const Command& c : commands) {
    if (infer::rm::CreateCommand(ctx, c.name, c.fn, c.flags, 0, 0, 0) != REDISMODULE_OK) {
      infer::rm::Log(ctx, "warning", "infer: CreateCommand %s failed", c.name);
      return REDISMODULE_ERR;
    }
    RedisModuleCommandInfo info{};
    info.version = &kInfoVersion;
    info.summary = c.summary;
    info.since = "0.1.0";
    info.arity = c.arity;
    info.key_specs = c.specs->s;
    if (infer::rm::SetCommandInfo(infer::rm::GetCommand(ctx, c.name), &info) != REDISMODULE_OK) {
      infer::rm::Log(ctx, "warning", "infer: SetCommandInfo %s failed", c.name);
      return REDISMODULE_ERR;
    }
  }
  return REDISMODULE_OK;
}
