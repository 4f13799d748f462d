// The model and token commands: flags, arity and exact key specs (spec §0.4: the legacy first/last/step
// form makes every key read-write for ACL, so each key argument gets a spec here); the vector-set
// commands are in vset_commands.cpp.
// Commands whose keys follow a keyword also take getkeys-api: Redis 7.0 routes cluster commands by the
// legacy range, which keyword specs cannot give, or by the command's own answer. TOKENIZE, EMBED and
// GENERATE are not flagged write (nor may-replicate): their keyless forms are reads that run on
// replicas, in read-only scripts and during client pauses; their STORE and STREAM writes check the
// node's role themselves and go through the write queue (write_queue.h), which waits out pauses.
#include "redis/command_registration.h"
#include "redis/commands.h"
#include "redis/semantic_cache.h"
#include "redis/stream_registry.h"

namespace infer::redis {
namespace {

constexpr char kLoad[] = "infer.load";
constexpr char kUnload[] = "infer.unload";
constexpr char kModels[] = "infer.models";
constexpr char kInfo[] = "infer.info";
constexpr char kStats[] = "infer.stats";
constexpr char kTokenize[] = "infer.tokenize";
constexpr char kDetokenize[] = "infer.detokenize";
constexpr char kGenerate[] = "infer.generate";
constexpr char kEmbed[] = "infer.embed";
constexpr char kRag[] = "infer.rag";
constexpr char kStreamState[] = "infer.streamstate";

// STORE key of INFER.TOKENIZE: overwritten like a plain SET. "STORE" is searched from argv[3] so that
// the text argument itself is never taken for the keyword.
RedisModuleCommandKeySpec tokenize_specs[2];
// KEY key of INFER.DETOKENIZE (ids are numbers, so the keyword cannot be confused with one).
RedisModuleCommandKeySpec detokenize_specs[2];
// INFER.GENERATE: TOKENS key [key ...] ends at the next keyword, which key specs cannot express, so the
// specs carry VARIABLE_FLAGS and the server asks the command itself (getkeys-api, KeyAtPosWithFlags)
// for the exact keys and their flags; the specs still document them in COMMAND INFO.
RedisModuleCommandKeySpec generate_specs[4];
// INFER.EMBED's STORE key: searched from argv[3] so that the model name or text is never taken for the
// keyword.
RedisModuleCommandKeySpec embed_specs[2];
// INFER.RAG: the set, and the STREAM and CACHE keys after their keywords (getkeys-api gives their exact
// positions).
RedisModuleCommandKeySpec rag_specs[4];
// INFER.STREAMSTATE key ...: the stream it records as open or done (it does not touch the key).
RedisModuleCommandKeySpec streamstate_specs[2];

}  // namespace

int register_commands(RedisModuleCtx* ctx) {
  tokenize_specs[0] = keyword_key_spec("token blob written here",
                                       REDISMODULE_CMD_KEY_OW | REDISMODULE_CMD_KEY_UPDATE, "STORE", 3, 0);
  detokenize_specs[0] =
      keyword_key_spec("token blob read here", REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS, "KEY", 2, 0);
  generate_specs[0] = keyword_key_spec("token keys, up to the next keyword",
                                       REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS |
                                           REDISMODULE_CMD_KEY_VARIABLE_FLAGS,
                                       "TOKENS", 2, -1);
  generate_specs[1] = keyword_key_spec("stream the output is appended to",
                                       REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_INSERT |
                                           REDISMODULE_CMD_KEY_VARIABLE_FLAGS,
                                       "STREAM", -1, 0);
  generate_specs[2] = keyword_key_spec("semantic cache: vector set looked up, stored into, expired entries removed",
                                       kCacheKeyFlags | REDISMODULE_CMD_KEY_VARIABLE_FLAGS, "CACHE", -1, 0);

  embed_specs[0] = keyword_key_spec("vector set the embedding is added to",
                                    REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_UPDATE, "STORE", 3, 0);
  rag_specs[0] = index_key_spec("vector set searched; document keys found through it are ACL-checked",
                                REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS, 2);
  rag_specs[1] = generate_specs[1];
  rag_specs[2] = generate_specs[2];

  streamstate_specs[0] = index_key_spec("generation stream recorded", REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS, 1);

  const CommandDef commands[] = {
      {"infer.load", guarded<cmd_load, kLoad>, "admin deny-oom deny-script", -3,
       "Load a GGUF model from the model directory under a name (off the main thread)", nullptr},
      {"infer.unload", guarded<cmd_unload, kUnload>, "admin", 2,
       "Unload a model; requests in flight finish first", nullptr},
      {"infer.models", guarded<cmd_models, kModels>, "readonly fast allow-busy", 1, "List loaded models", nullptr},
      {"infer.info", guarded<cmd_info, kInfo>, "readonly fast allow-busy", 2, "Describe a loaded model", nullptr},
      {"infer.stats", guarded<cmd_stats, kStats>, "readonly fast allow-busy", -1, "Serving counters", nullptr},
      {"infer.tokenize", guarded<cmd_tokenize, kTokenize>, "deny-oom getkeys-api no-mandatory-keys", -3,
       "Text to token ids, optionally stored as a token blob", tokenize_specs},
      {"infer.detokenize", guarded<cmd_detokenize, kDetokenize>, "readonly getkeys-api no-mandatory-keys", -3,
       "Token ids (or a blob) to text", detokenize_specs},
      {"infer.generate", guarded<cmd_generate, kGenerate>,
       "readonly deny-oom deny-script getkeys-api no-mandatory-keys", -3,
       "Generate text from a prompt, token keys or a chat, optionally with tools, logprobs or a JSON schema / grammar (blocks only the caller)", generate_specs},
      {"infer.embed", guarded<cmd_embed, kEmbed>, "deny-oom deny-script getkeys-api no-mandatory-keys", -3,
       "Embed text with a loaded model, optionally adding it to a vector set (blocks only the caller)",
       embed_specs},
      {"infer.rag", guarded<cmd_rag, kRag>, "readonly deny-oom deny-script getkeys-api", -5,
       "Retrieve documents from a vector set and generate an answer from them (blocks only the caller)",
       rag_specs},
      // Internal (stream_registry.h): refused unless it comes from the master or the AOF.
      {"infer.streamstate", guarded<cmd_streamstate, kStreamState>, "write deny-script", -3,
       "Internal: records a generation stream as open or done (replication and AOF only)", streamstate_specs},
  };
  return create_commands(ctx, commands);
}

}  // namespace infer::redis
