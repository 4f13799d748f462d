// register_vector_commands (redis/commands.h): the "infervset" data type and the INFER.V* commands
// with their flags, arity and exact key specs (spec §0.4, §6).
#include "redis/command_registration.h"
#include "redis/commands.h"
#include "redis/vset_handlers.h"
#include "redis/vset_type.h"

namespace infer::redis {
namespace {

constexpr char kVadd[] = "infer.vadd";
constexpr char kVrem[] = "infer.vrem";
constexpr char kVsetattr[] = "infer.vsetattr";
constexpr char kVsim[] = "infer.vsim";
constexpr char kVemb[] = "infer.vemb";
constexpr char kVcard[] = "infer.vcard";
constexpr char kVdim[] = "infer.vdim";
constexpr char kVinfo[] = "infer.vinfo";
constexpr char kVgetattr[] = "infer.vgetattr";
constexpr char kVismember[] = "infer.vismember";
constexpr char kVrandmember[] = "infer.vrandmember";
constexpr char kVlinks[] = "infer.vlinks";
constexpr char kVrange[] = "infer.vrange";

constexpr uint64_t RO = REDISMODULE_CMD_KEY_RO, RW = REDISMODULE_CMD_KEY_RW, ACCESS = REDISMODULE_CMD_KEY_ACCESS,
                   UPDATE = REDISMODULE_CMD_KEY_UPDATE,
                   DELETE = REDISMODULE_CMD_KEY_DELETE;

// Static: the key-spec arrays stay valid for as long as Redis might look at them. One key each, and a
// zeroed terminator.
RedisModuleCommandKeySpec g_specs[5][2];

}  // namespace

int register_vector_commands(RedisModuleCtx* ctx) {
  if (register_vset_type(ctx) != REDISMODULE_OK) {
    rm::Log(ctx, "warning", "infer: cannot create the infervset data type");
    return REDISMODULE_ERR;
  }
  g_specs[0][0] = index_key_spec("vector set", RW | UPDATE, 1);
  g_specs[1][0] = index_key_spec("vector set", RW | DELETE, 1);
  g_specs[2][0] = index_key_spec("vector set", RW | UPDATE, 1);
  g_specs[3][0] = index_key_spec("vector set", RO | ACCESS, 1);
  g_specs[4][0] = index_key_spec("vector set (metadata only)", RO, 1);

  const CommandDef commands[] = {
      {"infer.vadd", guarded<cmd_vadd, kVadd>, "write deny-oom", -5, "Add or update an element of a vector set",
       g_specs[0]},
      {"infer.vrem", guarded<cmd_vrem, kVrem>, "write", 3, "Remove an element from a vector set", g_specs[1]},
      {"infer.vsetattr", guarded<cmd_vsetattr, kVsetattr>, "write deny-oom fast", 4,
       "Set or remove the JSON attributes of an element", g_specs[2]},
      {"infer.vsim", guarded<cmd_vsim, kVsim>, "readonly", -4, "Elements most similar to a vector or element",
       g_specs[3]},
      {"infer.vemb", guarded<cmd_vemb, kVemb>, "readonly fast", -3, "The vector of an element", g_specs[3]},
      {"infer.vgetattr", guarded<cmd_vgetattr, kVgetattr>, "readonly fast", 3, "The JSON attributes of an element",
       g_specs[3]},
      {"infer.vcard", guarded<cmd_vcard, kVcard>, "readonly fast", 2, "Number of elements", g_specs[4]},
      {"infer.vdim", guarded<cmd_vdim, kVdim>, "readonly fast", 2, "Vector dimension", g_specs[4]},
      {"infer.vinfo", guarded<cmd_vinfo, kVinfo>, "readonly fast", 2, "Parameters of a vector set", g_specs[4]},
      {"infer.vismember", guarded<cmd_vismember, kVismember>, "readonly fast", 3, "Whether an element is in a vector set",
       g_specs[3]},
      {"infer.vrandmember", guarded<cmd_vrandmember, kVrandmember>, "readonly", -2,
       "Random elements of a vector set", g_specs[3]},
      {"infer.vrange", guarded<cmd_vrange, kVrange>, "readonly", -4,
       "Element names in byte order between two bounds (a stateless iterator)", g_specs[3]},
      {"infer.vlinks", guarded<cmd_vlinks, kVlinks>, "readonly", -3,
       "The graph neighbours of an element on each level, optionally with their scores", g_specs[3]},
  };
  return create_commands(ctx, commands);
}

}  // namespace infer::redis
