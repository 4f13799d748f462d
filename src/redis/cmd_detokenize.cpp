// INFER.DETOKENIZE model id [id ...]   |   INFER.DETOKENIZE model KEY key
// Replies the text. Ids must be valid for the model; a key must hold a token blob of the model's
// vocabulary or a raw uint32 array (token_keys.h) of at most the model's context in tokens: it is
// copied and decoded on the main thread, so a larger one is refused before either; so are more ids
// than that.
#include "redis/args.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/token_keys.h"

namespace infer::redis {

int cmd_detokenize(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  // getkeys-api: Redis 7.0 routes cluster commands by these positions (key specs alone give none).
  if (rm::IsKeysPositionRequest(ctx)) {
    if (argc == 4 && is_word(argv[2], "KEY")) rm::KeyAtPosWithFlags(ctx, 3, REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS);
    return REDISMODULE_OK;
  }
  if (argc < 3) return rm::WrongArity(ctx);
  auto model = models().find(view(argv[1]));
  if (!model) return reply_error(ctx, "unknown model '" + str(argv[1]) + "' (see INFER.MODELS)");
  const tokenizer::Tokenizer& tok = model->engine->tokenizer();
  std::vector<int32_t> ids;
  if (is_word(argv[2], "KEY")) {
    if (argc != 4) return reply_error(ctx, "KEY takes exactly one key");
    const auto context = static_cast<size_t>(model->engine->options().context);
    if (KeyError e = read_token_key(ctx, argv[3], tok, &ids, context)) return reply_coded_error(ctx, e.code, e.message);
  } else {
    const long long context = model->engine->options().context;
    if (argc - 2 > context)
      return reply_error(ctx, std::to_string(argc - 2) + " ids are more than the model's context of " +
                                  std::to_string(context) + " tokens (ids are decoded on the main thread); "
                                  "detokenise them in parts");
    ids.reserve(static_cast<size_t>(argc - 2));
    std::string err;
    for (int i = 2; i < argc; ++i) {
      long long id = 0;
      if (!parse_int(argv[i], 0, tok.n_vocab() - 1, "token id", &id, &err))
        return reply_error(ctx, err + " (got '" + str(argv[i]) + "')");
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  std::string text = tok.decode(ids);
  return rm::ReplyWithStringBuffer(ctx, text.data(), text.size());
}

}  // namespace infer::redis
