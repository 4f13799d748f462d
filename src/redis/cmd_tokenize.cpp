// INFER.TOKENIZE model text [NOSPECIAL] [NOBOS] [STORE key]
// Replies the ids, or with STORE writes them as a token blob (token_keys.h) and replies their count.
// The store is a plain SET issued through RM_Call with "!", so replicas and the AOF see a SET of the
// blob and need no model (DESIGN "Redis module"). Texts longer than kSyncTokenizeBytes are tokenised
// on the background thread while only the caller waits; inside MULTI/Lua they are done inline.
#include <memory>

#include "redis/args.h"
#include "redis/background.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/stats.h"
#include "redis/token_keys.h"

namespace infer::redis {
namespace {

struct TokenizeJob {
  std::shared_ptr<const LoadedModel> model;
  std::string text;
  tokenizer::EncodeOptions opts;
  RedisModuleString* store = nullptr;  // retained copy of the key name; freed by free_job
  std::vector<int32_t> ids;
  std::string error;
};

// Main thread: store (when asked) and reply.
int reply_ids(RedisModuleCtx* ctx, const TokenizeJob& job) {
  if (!job.error.empty()) return reply_error(ctx, "cannot tokenise: " + job.error);
  if (!job.store) {
    rm::ReplyWithArray(ctx, static_cast<long>(job.ids.size()));
    for (int32_t id : job.ids) rm::ReplyWithLongLong(ctx, id);
    return REDISMODULE_OK;
  }
  std::string blob = make_token_blob(job.ids, job.model->engine->tokenizer());
  RedisModuleCallReply* r = rm::Call(ctx, "SET", "!sb", job.store, blob.data(), blob.size());
  if (!r) return reply_error(ctx, "SET of the token blob failed");
  bool failed = rm::CallReplyType(r) == REDISMODULE_REPLY_ERROR;
  std::string why;
  if (failed) {
    size_t len = 0;
    const char* p = rm::CallReplyStringPtr(r, &len);
    why.assign(p ? p : "", p ? len : 0);
  }
  rm::FreeCallReply(r);
  if (failed) return reply_error(ctx, "SET of the token blob failed: " + why);
  return rm::ReplyWithLongLong(ctx, static_cast<long long>(job.ids.size()));
}

void encode(TokenizeJob* job) {
  try {
    job->ids = job->model->engine->tokenizer().encode(job->text, job->opts);
  } catch (const std::exception& e) {
    job->error = e.what();
  }
}

int on_reply(RedisModuleCtx* ctx, RedisModuleString**, int) {
  try {
    MainThreadTimer timer("infer.tokenize reply");
    return reply_ids(ctx, *static_cast<TokenizeJob*>(rm::GetBlockedClientPrivateData(ctx)));
  } catch (...) {
    return reply_error(ctx, "internal error while replying");
  }
}

void free_job(RedisModuleCtx*, void* privdata) {
  auto* job = static_cast<TokenizeJob*>(privdata);
  if (job->store) rm::FreeString(nullptr, job->store);
  delete job;
}

}  // namespace

int cmd_tokenize(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 3) return rm::WrongArity(ctx);
  auto job = std::make_unique<TokenizeJob>();
  RedisModuleString* store = nullptr;
  for (int i = 3; i < argc; ++i) {
    if (is_word(argv[i], "NOSPECIAL")) {
      job->opts.parse_special = false;
    } else if (is_word(argv[i], "NOBOS")) {
      job->opts.add_special = false;
    } else if (is_word(argv[i], "STORE")) {
      if (store) return reply_error(ctx, "STORE given twice");
      if (i + 1 >= argc) return reply_error(ctx, "STORE needs a key");
      store = argv[++i];
    } else {
      return reply_error(ctx, "unknown option '" + str(argv[i]) + "' (NOSPECIAL, NOBOS, STORE key)");
    }
  }
  job->model = models().find(view(argv[1]));
  if (!job->model) return reply_error(ctx, "unknown model '" + str(argv[1]) + "' (see INFER.MODELS)");
  job->text = str(argv[2]);
  bool can_block = !(rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_DENY_BLOCKING);
  if (job->text.size() <= kSyncTokenizeBytes || !can_block) {
    job->store = store;  // argv outlives this call
    encode(job.get());
    return reply_ids(ctx, *job);
  }
  if (store) job->store = rm::CreateStringFromString(nullptr, store);  // argv dies with the handler
  TokenizeJob* raw = job.release();
  RedisModuleBlockedClient* bc = rm::BlockClient(ctx, on_reply, nullptr, free_job, 0);
  bool queued = run_in_background([bc, raw] {
    encode(raw);
    rm::UnblockClient(bc, raw);  // never NULL: free_job owns the job
  });
  if (!queued) {
    rm::AbortBlock(bc);
    free_job(nullptr, raw);
    return reply_coded_error(ctx, "BUSY", "too many texts waiting to be tokenised; retry later");
  }
  return REDISMODULE_OK;
}

}  // namespace infer::redis
