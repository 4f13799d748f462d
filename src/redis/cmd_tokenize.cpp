// INFER.TOKENIZE model text [NOSPECIAL] [NOBOS] [STORE key]
// Replies the ids, or with STORE writes them as a token blob (token_keys.h) and replies their count.
// The store is a plain SET issued through RM_Call with "!", so replicas and the AOF see a SET of the
// blob and need no model (DESIGN "Redis module").
#include "redis/args.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/token_keys.h"

namespace infer::redis {

int cmd_tokenize(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 3) return rm::WrongArity(ctx);
  tokenizer::EncodeOptions opts;
  RedisModuleString* store = nullptr;
  for (int i = 3; i < argc; ++i) {
    if (is_word(argv[i], "NOSPECIAL")) {
      opts.parse_special = false;
    } else if (is_word(argv[i], "NOBOS")) {
      opts.add_special = false;
    } else if (is_word(argv[i], "STORE")) {
      if (store) return reply_error(ctx, "STORE given twice");
      if (i + 1 >= argc) return reply_error(ctx, "STORE needs a key");
      store = argv[++i];
    } else {
      return reply_error(ctx, "unknown option '" + str(argv[i]) + "' (NOSPECIAL, NOBOS, STORE key)");
    }
  }
  auto model = models().find(view(argv[1]));
  if (!model) return reply_error(ctx, "unknown model '" + str(argv[1]) + "' (see INFER.MODELS)");
  const tokenizer::Tokenizer& tok = model->engine->tokenizer();
  std::vector<int32_t> ids = tok.encode(view(argv[2]), opts);
  if (!store) {
    rm::ReplyWithArray(ctx, static_cast<long>(ids.size()));
    for (int32_t id : ids) rm::ReplyWithLongLong(ctx, id);
    return REDISMODULE_OK;
  }
  std::string blob = make_token_blob(ids, tok);
  RedisModuleCallReply* r = rm::Call(ctx, "SET", "!sb", store, blob.data(), blob.size());
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
  return rm::ReplyWithLongLong(ctx, static_cast<long long>(ids.size()));
}

}  // namespace infer::redis
