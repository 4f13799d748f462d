// INFER.MODELS, INFER.INFO name, INFER.UNLOAD name: the model registry as seen by clients. A master
// sends its unloads to its replicas (write_queue.h), as it does its loads.
#include "redis/admin_acl.h"
#include "redis/args.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/write_queue.h"

namespace infer::redis {

int cmd_models(RedisModuleCtx* ctx, RedisModuleString**, int argc) {
  if (argc != 1) return rm::WrongArity(ctx);
  const auto& all = models().all();
  rm::ReplyWithArray(ctx, static_cast<long>(all.size()));
  for (const auto& [name, m] : all) rm::ReplyWithStringBuffer(ctx, name.data(), name.size());
  return REDISMODULE_OK;
}

int cmd_info(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 2) return rm::WrongArity(ctx);
  auto m = models().find(view(argv[1]));
  if (!m) return reply_error(ctx, "unknown model '" + str(argv[1]) + "'");
  const tokenizer::Tokenizer& tok = m->engine->tokenizer();
  const engine::EngineOptions& o = m->engine->options();
  char fp[24];
  snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(tok.fingerprint()));
  rm::ReplyWithMap(ctx, REDISMODULE_POSTPONED_LEN);
  long n = 0;
  auto s = [&](const char* k, const std::string& v) {
    rm::ReplyWithCString(ctx, k);
    rm::ReplyWithStringBuffer(ctx, v.data(), v.size());
    ++n;
  };
  auto ll = [&](const char* k, long long v) {
    rm::ReplyWithCString(ctx, k);
    rm::ReplyWithLongLong(ctx, v);
    ++n;
  };
  s("name", m->name);
  s("path", m->path);
  s("tokenizer", tok.model_name());
  s("vocab_fingerprint", fp);
  ll("n_vocab", m->engine->n_vocab());
  ll("n_embd", m->engine->n_embd());
  ll("bos", tok.bos());
  ll("eos", tok.eos());
  ll("context", o.context);
  ll("max_running", o.max_running);
  ll("queue_depth", o.queue_depth);
  ll("threads", o.threads);
  s("weights", o.mmap ? "mmap" : "copy");
  s("device", engine::device_name(o.device.kind));
  s("backend", m->engine->backend_description());
  s("kv_type", engine::kv_type_name(m->engine->stats().kv_type));
  ll("kv_bytes_per_token", static_cast<long long>(m->engine->stats().kv_bytes_per_token));
  ll("interleaved_matrices", m->engine->stats().interleaved_matrices);
  ll("model_bytes", static_cast<long long>(m->engine->stats().model_bytes));
  ll("loaded_at_ms", m->loaded_at_ms);
  ll("has_chat_template", tok.chat_template().empty() ? 0 : 1);
  rm::ReplySetMapLength(ctx, n);
  return REDISMODULE_OK;
}

int cmd_unload(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 2) return rm::WrongArity(ctx);
  if (refuse_unless_module_admin(ctx, "infer.unload")) return REDISMODULE_OK;
  // Requests in flight hold their own reference to the engine: they finish normally and the engine is
  // destroyed (off the main thread) after the last one.
  if (!models().remove(view(argv[1]))) return reply_error(ctx, "unknown model '" + str(argv[1]) + "'");
  if (!(rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_REPLICATED)) replicate_to_replicas("INFER.UNLOAD", {str(argv[1])});
  return rm::ReplyWithSimpleString(ctx, "OK");
}

}  // namespace infer::redis
