// INFER.TOKENIZE model text [NOSPECIAL] [NOBOS] [STORE key]
// Replies the ids, or with STORE writes them as a token blob (token_keys.h) and replies their count.
// The store replicates as a plain SET of the blob, so replicas and the AOF need no model (DESIGN
// "Redis module"). Texts longer than kSyncTokenizeBytes are tokenised
// on a background thread while only the caller waits; inside MULTI/Lua they are done inline, up to
// infer.inline-max-bytes.
#include <memory>

#include "redis/args.h"
#include "redis/background.h"
#include "redis/blocked_call.h"
#include "redis/cluster_slots.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/settings.h"
#include "redis/stats.h"
#include "redis/token_keys.h"

namespace infer::redis {
namespace {

// The reply callback writes the ids on the main thread (invariant 4), about 25 ns each: this many stay
// near half the budget, the margin a slower machine needs (MainThreadBudget.TokenizeRepliesAtMostTheReplyLimit).
constexpr size_t kMaxReplyIds = 1 << 17;

struct TokenizeJob : BlockedJob {
  TokenizeJob() : BlockedJob("infer.tokenize", "tokenisation") {}
  ~TokenizeJob() override {
    if (owns_store) rm::FreeString(nullptr, store);
    if (held_text) rm::FreeString(nullptr, held_text);
    if (blob) rm::FreeString(nullptr, blob);
  }
  int reply(RedisModuleCtx* ctx) override;
  bool has_writes() const override { return store && error.empty(); }
  void write(RedisModuleCtx* ctx, Writable writable) override;

  std::shared_ptr<const LoadedModel> model;
  std::string_view text;                  // argv's (inline) or held_text's: not copied
  RedisModuleString* held_text = nullptr;  // argv's text, held for the background thread
  tokenizer::EncodeOptions opts;
  RedisModuleString* store = nullptr;  // the key name: argv's (sync) or a retained copy (owns_store)
  bool owns_store = false;
  std::vector<int32_t> ids;  // without STORE
  size_t n_ids = 0;
  // With STORE: the value, made where the text is tokenised (a long text's blob is megabytes: the
  // write only shares it). A string made without a context may be made on any thread.
  RedisModuleString* blob = nullptr;
  std::string error;        // the tokenizer's
  std::string store_error;  // the SET's, with its code
  bool asked = false;       // routed here by ASKING: the slot was importing when the command ran
  void encode() {
    try {
      ids = model->engine->tokenizer().encode(text, opts);
      n_ids = ids.size();
      if (!store && n_ids > kMaxReplyIds) {
        error = "the text is " + std::to_string(n_ids) + " tokens, more than the " + std::to_string(kMaxReplyIds) +
                " a reply may hold; STORE them in a key instead";
        ids = {};
        return;
      }
      if (store) {
        const std::string bytes = make_token_blob(ids, model->engine->tokenizer());
        blob = rm::CreateString(nullptr, bytes.data(), bytes.size());
        ids = {};
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
};

// Writes the ids as a token blob, as SET would (any old value and its TTL replaced), and replicates a
// plain SET; returns "" or the error reply. Not through RM_Call: in a cluster it routes like a client
// without ASKING, and the slot check is the caller's (cluster_slots.h).
std::string store_blob(RedisModuleCtx* ctx, const TokenizeJob& job) {
  RedisModuleKey* k = rm::OpenKey(ctx, job.store, REDISMODULE_WRITE);
  // The key and the replicated SET share the job's string: nothing is copied on the main thread.
  const bool ok = k && rm::StringSet(k, job.blob) == REDISMODULE_OK;
  if (k) rm::CloseKey(k);
  if (!ok) return "ERR SET of the token blob failed";
  rm::Replicate(ctx, "SET", "ss", job.store, job.blob);
  rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_STRING, "set", job.store);
  return "";
}

int TokenizeJob::reply(RedisModuleCtx* ctx) {
  if (!error.empty()) return reply_error(ctx, "cannot tokenise: " + error);
  if (!store_error.empty()) return rm::ReplyWithError(ctx, store_error.c_str());
  if (store) return rm::ReplyWithLongLong(ctx, static_cast<long long>(n_ids));
  rm::ReplyWithArray(ctx, static_cast<long>(ids.size()));
  for (int32_t id : ids) rm::ReplyWithLongLong(ctx, id);
  return REDISMODULE_OK;
}

void TokenizeJob::write(RedisModuleCtx* ctx, Writable writable) {
  if (writable == Writable::Replica) {
    store_error = "READONLY this node became a replica while the text was tokenised; nothing stored";
    return;
  }
  // In a cluster the slot may have moved while the text was tokenised: the client gets the redirection.
  store_error = cluster_write_refusal(ctx, view(store), nullptr, asked);
  if (store_error.empty()) store_error = store_blob(ctx, *this);
}

// The command's arguments after the model and the text.
struct TokenizeArgs {
  bool parse_special = true;
  bool add_special = true;
  int store_pos = 0;  // argv index of STORE's key; 0: no STORE
  RedisModuleString* store = nullptr;
};

// Parses argv without touching the keyspace (also used to answer the server's key-position queries).
bool parse(RedisModuleString** argv, int argc, TokenizeArgs* a, std::string* err) {
  for (int i = 3; i < argc; ++i) {
    if (is_word(argv[i], "NOSPECIAL")) {
      a->parse_special = false;
    } else if (is_word(argv[i], "NOBOS")) {
      a->add_special = false;
    } else if (is_word(argv[i], "STORE")) {
      if (a->store) return *err = "STORE given twice", false;
      if (i + 1 >= argc) return *err = needs_value("STORE", "a key"), false;
      a->store_pos = i + 1;
      a->store = argv[++i];
    } else {
      return *err = "unknown option '" + str(argv[i]) + "' (NOSPECIAL, NOBOS, STORE key)", false;
    }
  }
  return true;
}

}  // namespace

int cmd_tokenize(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  TokenizeArgs a;
  std::string err;
  // getkeys-api: Redis 7.0 routes cluster commands by these positions (key specs alone give none).
  if (rm::IsKeysPositionRequest(ctx)) {
    if (argc >= 3 && parse(argv, argc, &a, &err) && a.store_pos)
      rm::KeyAtPosWithFlags(ctx, a.store_pos, REDISMODULE_CMD_KEY_OW | REDISMODULE_CMD_KEY_UPDATE);
    return REDISMODULE_OK;
  }
  if (argc < 3) return rm::WrongArity(ctx);
  if (!parse(argv, argc, &a, &err)) return reply_error(ctx, err);
  auto job = std::make_unique<TokenizeJob>();
  job->opts.parse_special = a.parse_special;
  job->opts.add_special = a.add_special;
  RedisModuleString* store = a.store;
  job->model = models().find(view(argv[1]));
  if (!job->model) return reply_error(ctx, "unknown model '" + str(argv[1]) + "' (see INFER.MODELS)");
  const int flags = rm::GetContextFlags(ctx);
  if (store) {
    // The command is not flagged write, so that its keyless form runs on replicas and during client
    // pauses: STORE makes those checks itself.
    if (flags & REDISMODULE_CTX_FLAGS_SLAVE)
      return reply_coded_error(ctx, "READONLY", "STORE cannot write on a replica; tokenise without STORE");
    if (flags & REDISMODULE_CTX_FLAGS_LUA)
      return reply_error(ctx, "STORE cannot run inside a script (a read-only script could write through it)");
  }
  job->text = view(argv[2]);
  const bool can_block = !(flags & REDISMODULE_CTX_FLAGS_DENY_BLOCKING);
  if (!can_block && job->text.size() > static_cast<size_t>(settings().inline_max_bytes))
    return reply_error(ctx, "text of " + std::to_string(job->text.size()) + " bytes is over infer.inline-max-bytes (" +
                                std::to_string(settings().inline_max_bytes) +
                                "): inside MULTI/EXEC or a script INFER.TOKENIZE runs on the main thread; run it "
                                "outside them, or raise infer.inline-max-bytes");
  // During a client pause the write must wait in the queue, which needs a blocked client.
  const bool paused_store = store && rm::AvoidReplicaTraffic();
  if (paused_store && !can_block)
    return reply_coded_error(ctx, "TRYAGAIN", "writes are paused (CLIENT PAUSE or a failover); STORE later");
  if ((job->text.size() <= kSyncTokenizeBytes && !paused_store) || !can_block) {
    job->store = store;  // argv outlives this call
    job->encode();
    if (job->has_writes()) job->store_error = store_blob(ctx, *job);
    return job->reply(ctx);
  }
  if (store) {
    job->store = rm::CreateStringFromString(nullptr, store);  // argv dies with the handler
    job->owns_store = true;
    job->asked = importing_here(ctx, view(store));
  }
  // Held, not copied: a long text would cost the main thread its copy. Nothing writes argv's strings.
  job->held_text = rm::hold_for_threads(argv[2]);
  job->text = view(job->held_text);
  auto* blocked = static_cast<TokenizeJob*>(block_client(ctx, std::move(job)));
  bool queued = run_in_background(blocked->text.size(), [blocked, cancellation = blocked->cancellation] {
    if (cancellation->requested())
      blocked->error = "cancelled";  // the client left: nothing to reply to, nothing to store
    else
      blocked->encode();
    complete(blocked);
  });
  if (!queued) {
    abort_blocked(blocked);
    return reply_coded_error(ctx, "BUSY", "too many texts waiting to be tokenised; retry later");
  }
  return REDISMODULE_OK;
}

}  // namespace infer::redis
