// INFER.GENERATE model {text | PROMPT text | TOKENS key [key ...] [PROMPT suffix] | CHAT role text ...}
//   [MAXTOKENS n] [TEMP t] [TOPK k] [TOPP p] [MINP p] [REPEAT-PENALTY r] [SEED s] [STOP s]... [TIMEOUT ms]
//   [WITHSTATS] [STREAM key]
//
// The blocking pattern of spec §3.1, in three pieces:
//   handler (main thread): parse, copy token keys out of the keyspace, block the client, submit;
//   engine thread: on_token feeds the optional StreamWriter, on_done stores the result and unblocks;
//   reply / timeout / disconnect / free callbacks (main thread): reply, cancel, clean up.
// The GenerateJob is owned by the blocked client from BlockClient on: free_job deletes it, always
// (UnblockClient never gets NULL).
#include <chrono>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "redis/args.h"
#include "redis/background.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/settings.h"
#include "redis/stats.h"
#include "redis/stream_writer.h"
#include "redis/token_keys.h"
#include "tokenizer/chat_template.h"

namespace infer::redis {
namespace {

constexpr const char* kKeywords[] = {"PROMPT", "TOKENS", "CHAT", "MAXTOKENS", "TEMP", "TOPK", "TOPP", "MINP",
                                     "REPEAT-PENALTY", "SEED", "STOP", "TIMEOUT", "WITHSTATS", "STREAM"};
constexpr int kMaxStops = 16;

bool is_keyword(const RedisModuleString* s) {
  for (const char* k : kKeywords)
    if (is_word(s, k)) return true;
  return false;
}

struct GenerateArgs {
  RedisModuleString* model = nullptr;
  RedisModuleString* prompt = nullptr;  // PROMPT text, or the suffix after TOKENS
  std::vector<RedisModuleString*> token_keys;
  std::vector<int> token_key_pos;
  std::vector<std::pair<RedisModuleString*, RedisModuleString*>> chat;
  RedisModuleString* stream_key = nullptr;
  int stream_key_pos = -1;
  engine::SamplingParams sampling;
  long long max_tokens = 0;
  std::vector<std::string> stop;
  long long timeout_ms = 0;
  bool with_stats = false;
};

// Parses argv without touching the keyspace (also used to answer the server's key-position queries).
bool parse(RedisModuleString** argv, int argc, GenerateArgs* a, std::string* err) {
  const Settings& s = settings();
  a->model = argv[1];
  a->max_tokens = s.default_max_tokens;
  a->timeout_ms = s.timeout_ms;
  bool seen_prompt = false;
  for (int i = 2; i < argc; ++i) {
    RedisModuleString* w = argv[i];
    auto value = [&](const char* what) -> RedisModuleString* {
      if (i + 1 >= argc) {
        *err = std::string(what) + " needs a value";
        return nullptr;
      }
      return argv[++i];
    };
    long long n = 0;
    double d = 0;
    if (i == 2 && !is_keyword(w)) {  // shorthand: INFER.GENERATE model "text" ...
      seen_prompt = true;
      a->prompt = w;
    } else if (is_word(w, "PROMPT")) {
      if (seen_prompt) return *err = "PROMPT given twice", false;
      if (!a->chat.empty()) return *err = "PROMPT cannot be combined with CHAT", false;
      seen_prompt = true;
      if (!(a->prompt = value("PROMPT"))) return false;
    } else if (is_word(w, "TOKENS")) {
      if (!a->token_keys.empty()) return *err = "TOKENS given twice", false;
      if (!a->chat.empty()) return *err = "TOKENS cannot be combined with CHAT", false;
      if (seen_prompt) return *err = "TOKENS must come before PROMPT (the prompt is a suffix to the tokens)", false;
      while (i + 1 < argc && !is_keyword(argv[i + 1])) {
        a->token_keys.push_back(argv[++i]);
        a->token_key_pos.push_back(i);
      }
      if (a->token_keys.empty()) return *err = "TOKENS needs at least one key", false;
    } else if (is_word(w, "CHAT")) {
      if (!a->chat.empty()) return *err = "CHAT given twice", false;
      if (seen_prompt || !a->token_keys.empty()) return *err = "CHAT cannot be combined with PROMPT or TOKENS", false;
      while (i + 2 < argc && !is_keyword(argv[i + 1])) {
        a->chat.emplace_back(argv[i + 1], argv[i + 2]);
        i += 2;
      }
      if (a->chat.empty()) return *err = "CHAT needs role/text pairs", false;
    } else if (is_word(w, "MAXTOKENS")) {
      RedisModuleString* v = value("MAXTOKENS");
      if (!v || !parse_int(v, 1, s.max_tokens, "MAXTOKENS", &a->max_tokens, err)) return false;
    } else if (is_word(w, "TEMP")) {
      RedisModuleString* v = value("TEMP");
      if (!v || !parse_real(v, 0, 100, "TEMP", &d, err)) return false;
      a->sampling.temperature = static_cast<float>(d);
    } else if (is_word(w, "TOPK")) {
      RedisModuleString* v = value("TOPK");
      if (!v || !parse_int(v, 0, 1 << 24, "TOPK", &n, err)) return false;
      a->sampling.top_k = static_cast<int>(n);
    } else if (is_word(w, "TOPP")) {
      RedisModuleString* v = value("TOPP");
      if (!v || !parse_real(v, 0, 1, "TOPP", &d, err)) return false;
      a->sampling.top_p = static_cast<float>(d);
    } else if (is_word(w, "MINP")) {
      RedisModuleString* v = value("MINP");
      if (!v || !parse_real(v, 0, 1, "MINP", &d, err)) return false;
      a->sampling.min_p = static_cast<float>(d);
    } else if (is_word(w, "REPEAT-PENALTY")) {
      RedisModuleString* v = value("REPEAT-PENALTY");
      if (!v || !parse_real(v, 0, 100, "REPEAT-PENALTY", &d, err)) return false;
      a->sampling.repeat_penalty = static_cast<float>(d);
    } else if (is_word(w, "SEED")) {
      RedisModuleString* v = value("SEED");
      if (!v || !parse_int(v, 0, LLONG_MAX, "SEED", &n, err)) return false;
      a->sampling.seed = static_cast<uint64_t>(n);
    } else if (is_word(w, "STOP")) {
      RedisModuleString* v = value("STOP");
      if (!v) return false;
      if (view(v).empty()) return *err = "STOP string must not be empty", false;
      if (static_cast<int>(a->stop.size()) >= kMaxStops) return *err = "at most 16 STOP strings", false;
      a->stop.push_back(str(v));
    } else if (is_word(w, "TIMEOUT")) {
      RedisModuleString* v = value("TIMEOUT");
      if (!v || !parse_int(v, 0, 86400000, "TIMEOUT", &a->timeout_ms, err)) return false;
    } else if (is_word(w, "WITHSTATS")) {
      a->with_stats = true;
    } else if (is_word(w, "STREAM")) {
      if (a->stream_key) return *err = "STREAM given twice", false;
      if (!(a->stream_key = value("STREAM"))) return false;
      a->stream_key_pos = i;
    } else {
      *err = "unknown option '" + str(w) + "'";
      return false;
    }
  }
  if (!seen_prompt && a->token_keys.empty() && a->chat.empty()) {
    *err = "one of PROMPT text, TOKENS key [key ...] or CHAT role text ... is required";
    return false;
  }
  return true;
}

// The engine handle of a request, set by whichever thread submitted it; cancel() may come first.
// Shared, because a background submit may still be setting it when the finished job is freed.
struct HandleSlot {
  void set(engine::Handle h) {
    std::lock_guard<std::mutex> lock(mu);
    handle = std::move(h);
    if (cancel_requested) handle.cancel();
  }
  void cancel() {
    std::lock_guard<std::mutex> lock(mu);
    cancel_requested = true;
    if (handle) handle.cancel();
  }
  std::mutex mu;
  engine::Handle handle;          // guarded by mu
  bool cancel_requested = false;  // guarded by mu
};

struct GenerateJob {
  RedisModuleBlockedClient* bc = nullptr;
  std::shared_ptr<const LoadedModel> model;  // keeps the engine alive until the job is freed
  std::optional<engine::SubmitError> refusal;  // submit refused on the background thread

  std::shared_ptr<HandleSlot> slot = std::make_shared<HandleSlot>();
  void cancel() { slot->cancel(); }
  std::shared_ptr<StreamWriter> stream;
  bool with_stats = false;
  long long timeout_ms = 0;
  engine::Result result;  // written by on_done before UnblockClient
  bool unblocked = false;  // main thread: CLIENT UNBLOCK replied already
};

// Blocked client → job, for the timeout and disconnect callbacks (main thread only).
std::unordered_map<RedisModuleBlockedClient*, GenerateJob*>& live_jobs() {
  static std::unordered_map<RedisModuleBlockedClient*, GenerateJob*> m;
  return m;
}

GenerateJob* job_of(RedisModuleBlockedClient* bc) {
  auto it = live_jobs().find(bc);
  return it == live_jobs().end() ? nullptr : it->second;
}

int reply_timeout(RedisModuleCtx* ctx, long long timeout_ms) {
  return reply_coded_error(ctx, "TIMEOUT", "generation did not finish within " + std::to_string(timeout_ms) + " ms");
}

int reply_refusal(RedisModuleCtx* ctx, const engine::SubmitError& refusal) {
  if (refusal.kind == engine::SubmitError::Kind::Busy) {
    ++stats().busy_replies;
    return reply_coded_error(ctx, "BUSY",
                             refusal.message + "; retry in " + std::to_string(refusal.retry_after_ms) + " ms");
  }
  return reply_error(ctx, refusal.message);
}

int reply_result(RedisModuleCtx* ctx, GenerateJob* job) {
  if (job->refusal) return reply_refusal(ctx, *job->refusal);
  const engine::Result& r = job->result;
  switch (r.finish) {
    case engine::FinishReason::Error:
      return reply_error(ctx, "generation failed: " + r.error);
    case engine::FinishReason::Deadline:
      ++stats().timeouts;
      return reply_timeout(ctx, job->timeout_ms);
    case engine::FinishReason::Cancelled:
      return reply_error(ctx, "generation cancelled");
    default:
      break;
  }
  if (!job->with_stats) return rm::ReplyWithStringBuffer(ctx, r.text.data(), r.text.size());
  const engine::Timings& t = r.timings;
  rm::ReplyWithMap(ctx, 11);
  rm::ReplyWithCString(ctx, "text");
  rm::ReplyWithStringBuffer(ctx, r.text.data(), r.text.size());
  rm::ReplyWithCString(ctx, "finish");
  rm::ReplyWithCString(ctx, engine::finish_reason_name(r.finish));
  rm::ReplyWithCString(ctx, "prompt_tokens");
  rm::ReplyWithLongLong(ctx, t.prompt_tokens);
  rm::ReplyWithCString(ctx, "cached_tokens");
  rm::ReplyWithLongLong(ctx, t.cached_tokens);
  rm::ReplyWithCString(ctx, "generated_tokens");
  rm::ReplyWithLongLong(ctx, t.generated_tokens);
  rm::ReplyWithCString(ctx, "seed");
  rm::ReplyWithLongLong(ctx, static_cast<long long>(r.seed));
  rm::ReplyWithCString(ctx, "queue_ms");
  rm::ReplyWithDouble(ctx, t.queue_ms);
  rm::ReplyWithCString(ctx, "ttft_ms");
  rm::ReplyWithDouble(ctx, t.ttft_ms);
  rm::ReplyWithCString(ctx, "prefill_tps");
  rm::ReplyWithDouble(ctx, t.prefill_tps);
  rm::ReplyWithCString(ctx, "decode_tps");
  rm::ReplyWithDouble(ctx, t.decode_tps);
  rm::ReplyWithCString(ctx, "ids");
  rm::ReplyWithArray(ctx, static_cast<long>(r.ids.size()));
  for (int32_t id : r.ids) rm::ReplyWithLongLong(ctx, id);
  return REDISMODULE_OK;
}

int on_reply(RedisModuleCtx* ctx, RedisModuleString**, int) {
  MainThreadTimer timer("infer.generate reply");
  try {
    auto* job = static_cast<GenerateJob*>(rm::GetBlockedClientPrivateData(ctx));
    if (job->stream && !job->refusal)
      job->stream->finish(engine::finish_reason_name(job->result.finish), job->result.timings.generated_tokens);
    return reply_result(ctx, job);
  } catch (...) {
    return reply_error(ctx, "internal error while replying");
  }
}

// Only CLIENT UNBLOCK gets here: the client is blocked without a Redis timeout (see cmd_generate).
int on_timeout(RedisModuleCtx* ctx, RedisModuleString**, int) {
  try {
    MainThreadTimer timer("infer.generate unblocked");
    if (GenerateJob* job = job_of(rm::GetBlockedClientHandle(ctx))) {
      job->unblocked = true;
      job->cancel();  // the engine still finishes it (Cancelled) and on_done unblocks
    }
    return reply_coded_error(ctx, "UNBLOCKED", "client unblocked; generation cancelled");
  } catch (...) {
    return rm::ReplyWithError(ctx, "UNBLOCKED client unblocked; generation cancelled");
  }
}

void on_disconnect(RedisModuleCtx*, RedisModuleBlockedClient* bc) {
  try {
    if (GenerateJob* job = job_of(bc)) job->cancel();
    ++stats().disconnects;
  } catch (...) {
  }
}

void free_job(RedisModuleCtx*, void* privdata) {
  MainThreadTimer timer("infer.generate free");
  auto* job = static_cast<GenerateJob*>(privdata);
  try {
    live_jobs().erase(job->bc);
    if (job->refusal) --stats().generate_requests;  // counted when queued for the background submit
    if (job->stream && !job->refusal) {
      // The reply callback did not run (disconnect or unblock): the stream still gets its last entry.
      const char* reason = job->unblocked ? "cancelled" : engine::finish_reason_name(job->result.finish);
      job->stream->finish(reason, job->result.timings.generated_tokens);
    }
  } catch (...) {
  }
  delete job;
}

// Builds the engine request from parsed arguments, copying token keys now (invariant 3).
std::string build_request(RedisModuleCtx* ctx, const GenerateArgs& a, const LoadedModel& m, engine::Request* req,
                          const char** code) {
  const tokenizer::Tokenizer& tok = m.engine->tokenizer();
  if (!a.token_keys.empty()) {
    for (RedisModuleString* key : a.token_keys) {
      KeyError e = read_token_key(ctx, key, tok, &req->prompt_ids);
      if (e) {
        *code = e.code;
        return e.message;
      }
    }
    if (a.prompt) {
      // The suffix is short text typed by the client; encoding it here keeps one path for the ids.
      tokenizer::EncodeOptions o;
      o.add_special = false;
      std::vector<int32_t> suffix = tok.encode(view(a.prompt), o);
      req->prompt_ids.insert(req->prompt_ids.end(), suffix.begin(), suffix.end());
    }
    if (req->prompt_ids.empty()) return "the token keys hold no tokens";
    long long need = static_cast<long long>(req->prompt_ids.size()) + a.max_tokens;
    if (need > m.engine->options().context)
      return "prompt of " + std::to_string(req->prompt_ids.size()) + " tokens plus MAXTOKENS " +
             std::to_string(a.max_tokens) + " exceeds the context of " + std::to_string(m.engine->options().context);
  } else if (!a.chat.empty()) {
    if (tok.chat_template().empty()) return "CHAT: the model has no chat template; use PROMPT";
    auto family = tokenizer::detect_chat_family(tok.chat_template());
    if (!family) return "CHAT: the model's chat template is of an unknown family; use PROMPT";
    std::vector<tokenizer::ChatMessage> messages;
    for (const auto& [role, text] : a.chat) messages.push_back({str(role), str(text)});
    try {
      req->prompt_text = tokenizer::apply_chat_template(*family, messages, /*add_generation_prompt=*/true);
    } catch (const std::invalid_argument& e) {
      return std::string("CHAT: ") + e.what();
    }
  } else {
    req->prompt_text = str(a.prompt);  // tokenised inside Engine::submit
  }
  req->sampling = a.sampling;
  req->max_tokens = static_cast<int>(a.max_tokens);
  req->stop = a.stop;
  if (a.timeout_ms > 0)
    req->deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.timeout_ms);
  return "";
}

int report_keys(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  GenerateArgs a;
  std::string err;
  if (argc < 3 || !parse(argv, argc, &a, &err)) return REDISMODULE_OK;  // the command will fail anyway
  for (int pos : a.token_key_pos) rm::KeyAtPosWithFlags(ctx, pos, REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS);
  if (a.stream_key_pos > 0)
    rm::KeyAtPosWithFlags(ctx, a.stream_key_pos, REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_INSERT);
  return REDISMODULE_OK;
}

}  // namespace

int cmd_generate(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (rm::IsKeysPositionRequest(ctx)) return report_keys(ctx, argv, argc);
  if (argc < 3) return rm::WrongArity(ctx);
  GenerateArgs a;
  std::string err;
  if (!parse(argv, argc, &a, &err)) return reply_error(ctx, err);
  auto model = models().find(view(a.model));
  if (!model) return reply_error(ctx, "unknown model '" + str(a.model) + "' (see INFER.MODELS)");
  if (refuse_if_cannot_block(ctx, "INFER.GENERATE")) return REDISMODULE_OK;

  int flags = rm::GetContextFlags(ctx);
  if (a.stream_key) {
    if (flags & REDISMODULE_CTX_FLAGS_SLAVE)
      return reply_coded_error(ctx, "READONLY", "STREAM cannot write on a replica; generate without STREAM");
    RedisModuleKey* k = rm::OpenKey(ctx, a.stream_key, REDISMODULE_READ);
    int type = rm::KeyType(k);
    rm::CloseKey(k);
    if (type != REDISMODULE_KEYTYPE_EMPTY && type != REDISMODULE_KEYTYPE_STREAM)
      return reply_coded_error(ctx, "WRONGTYPE", "STREAM key holds a value that is not a stream");
  }

  engine::Request req;
  const char* code = "ERR";
  if (std::string e = build_request(ctx, a, *model, &req, &code); !e.empty()) return reply_coded_error(ctx, code, e);

  auto* job = new GenerateJob;
  job->model = model;
  job->with_stats = a.with_stats;
  job->timeout_ms = a.timeout_ms;
  if (a.stream_key)
    job->stream = std::make_shared<StreamWriter>(a.stream_key, rm::GetSelectedDb(ctx), settings().stream_maxlen);

  // TIMEOUT is enforced by the engine's deadline (the request finishes with Deadline and on_reply sends
  // -TIMEOUT), not by a Redis block timeout: in Redis 7.0, a block timeout that expires after
  // UnblockClient but before the main thread processes it unblocks the client with no reply at all
  // (moduleBlockedClientTimedOut returns early for an already unblocked handle), leaving it hanging.
  RedisModuleBlockedClient* bc = rm::BlockClient(ctx, on_reply, on_timeout, free_job, 0);
  job->bc = bc;
  rm::SetDisconnectCallback(bc, on_disconnect);
  rm::BlockedClientMeasureTimeStart(bc);

  engine::Callbacks cb;
  if (job->stream) {
    std::shared_ptr<StreamWriter> stream = job->stream;
    cb.on_token = [stream](int32_t, const std::string& piece) {
      try {
        stream->append(piece);
      } catch (...) {
        // Out of memory while buffering: that piece is missing from the stream, not from the reply.
      }
    };
  }
  cb.on_done = [job](engine::Result&& r) {
    // Engine thread. After UnblockClient the job belongs to the main thread: touch nothing after it.
    job->result = std::move(r);
    rm::BlockedClientMeasureTimeEnd(job->bc);
    rm::UnblockClient(job->bc, job);
  };
  live_jobs()[bc] = job;
  if (req.prompt_ids.empty() && req.prompt_text.size() > kSyncTokenizeBytes) {
    // Engine::submit tokenises prompt text on the calling thread: long texts go to the background
    // thread so the main thread only parses and copies. A refusal there is replied by on_reply.
    // Once submit succeeds the request may finish and the job be freed at any time: only the slot
    // (shared) is touched after it.
    auto task = [job, slot = job->slot, req = std::move(req), cb = std::move(cb)]() mutable {
      auto submitted = job->model->engine->submit(std::move(req), std::move(cb));
      if (auto* refusal = std::get_if<engine::SubmitError>(&submitted)) {
        job->refusal = *refusal;  // no callback will run: the job is still ours
        rm::UnblockClient(job->bc, job);
      } else {
        slot->set(std::get<engine::Handle>(submitted));
      }
    };
    if (!run_in_background(std::move(task))) {
      live_jobs().erase(bc);
      rm::AbortBlock(bc);
      delete job;
      return reply_coded_error(ctx, "BUSY", "too many prompts waiting to be tokenised; retry later");
    }
    ++stats().generate_requests;
    return REDISMODULE_OK;
  }
  auto submitted = model->engine->submit(std::move(req), std::move(cb));
  if (auto* refusal = std::get_if<engine::SubmitError>(&submitted)) {
    live_jobs().erase(bc);
    rm::AbortBlock(bc);  // no callbacks will run for this bc
    delete job;
    return reply_refusal(ctx, *refusal);
  }
  job->slot->set(std::get<engine::Handle>(submitted));
  ++stats().generate_requests;
  return REDISMODULE_OK;
}

}  // namespace infer::redis
