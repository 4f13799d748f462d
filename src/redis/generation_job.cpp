// Generation options and the blocked-client run shared by INFER.GENERATE and INFER.RAG
// (see generation_job.h for the pieces and who owns the job when).
#include "redis/generation_job.h"

#include <chrono>
#include <climits>
#include <utility>
#include <unordered_map>

#include "redis/args.h"
#include "redis/background.h"
#include "redis/settings.h"
#include "redis/stats.h"

namespace infer::redis {
namespace {

constexpr const char* kSamplingKeywords[] = {"MAXTOKENS", "TEMP", "TOPK", "TOPP", "MINP",
                                             "REPEAT-PENALTY", "SEED", "STOP", "TIMEOUT"};
constexpr int kMaxStops = 16;

// Blocked client → job, for the timeout and disconnect callbacks (main thread only).
std::unordered_map<RedisModuleBlockedClient*, GenerationJob*>& live_jobs() {
  static std::unordered_map<RedisModuleBlockedClient*, GenerationJob*> m;
  return m;
}

GenerationJob* job_of(RedisModuleBlockedClient* bc) {
  auto it = live_jobs().find(bc);
  return it == live_jobs().end() ? nullptr : it->second;
}

int reply_refusal(RedisModuleCtx* ctx, const engine::SubmitError& refusal) {
  if (refusal.kind == engine::SubmitError::Kind::Busy) {
    ++stats().busy_replies;
    return reply_coded_error(ctx, "BUSY",
                             refusal.message + "; retry in " + std::to_string(refusal.retry_after_ms) + " ms");
  }
  return reply_error(ctx, refusal.message);
}

void reply_stats_fields(RedisModuleCtx* ctx, const engine::Result& r) {
  const engine::Timings& t = r.timings;
  rm::ReplyWithCString(ctx, "finish");
  rm::ReplyWithCString(ctx, engine::finish_reason_name(r.finish));
  const std::pair<const char*, long long> counts[] = {{"prompt_tokens", t.prompt_tokens},
                                                      {"cached_tokens", t.cached_tokens},
                                                      {"generated_tokens", t.generated_tokens},
                                                      {"seed", static_cast<long long>(r.seed)}};
  for (const auto& [name, n] : counts) {
    rm::ReplyWithCString(ctx, name);
    rm::ReplyWithLongLong(ctx, n);
  }
  const std::pair<const char*, double> rates[] = {
      {"queue_ms", t.queue_ms}, {"ttft_ms", t.ttft_ms}, {"prefill_tps", t.prefill_tps}, {"decode_tps", t.decode_tps}};
  for (const auto& [name, x] : rates) {
    rm::ReplyWithCString(ctx, name);
    rm::ReplyWithDouble(ctx, x);
  }
  rm::ReplyWithCString(ctx, "ids");
  rm::ReplyWithArray(ctx, static_cast<long>(r.ids.size()));
  for (int32_t id : r.ids) rm::ReplyWithLongLong(ctx, id);
}
constexpr int kStatsFields = 10;

int reply_result(RedisModuleCtx* ctx, const GenerationJob* job) {
  if (!job->error.empty()) return reply_coded_error(ctx, job->error_code, job->error);
  if (job->refusal) return reply_refusal(ctx, *job->refusal);
  const engine::Result& r = job->result;
  switch (r.finish) {
    case engine::FinishReason::Error:
      return reply_error(ctx, "generation failed: " + r.error);
    case engine::FinishReason::Deadline:
      ++stats().timeouts;
      return reply_coded_error(ctx, "TIMEOUT", std::string(job->timeout_subject) + " did not finish within " +
                                                   std::to_string(job->timeout_ms) + " ms");
    case engine::FinishReason::Cancelled:
      return reply_error(ctx, "generation cancelled");
    default:
      break;
  }
  const int extra = job->extra_reply_fields();
  if (!job->with_stats && extra == 0) return rm::ReplyWithStringBuffer(ctx, r.text.data(), r.text.size());
  rm::ReplyWithMap(ctx, 1 + (job->with_stats ? kStatsFields : 0) + extra);
  rm::ReplyWithCString(ctx, "text");
  rm::ReplyWithStringBuffer(ctx, r.text.data(), r.text.size());
  if (job->with_stats) reply_stats_fields(ctx, r);
  job->reply_extra_fields(ctx);
  return REDISMODULE_OK;
}

bool replies_from_stream(const GenerationJob* job) { return job->stream && !job->refusal && job->error.empty(); }

int on_reply(RedisModuleCtx* ctx, RedisModuleString**, int) {
  auto* job = static_cast<GenerationJob*>(rm::GetBlockedClientPrivateData(ctx));
  try {
    const std::string timer_name = std::string(job->command) + " reply";
    MainThreadTimer timer(timer_name.c_str());
    if (replies_from_stream(job))
      job->stream->finish(ctx, engine::finish_reason_name(job->result.finish), job->result.timings.generated_tokens);
    return reply_result(ctx, job);
  } catch (...) {
    return reply_error(ctx, "internal error while replying");
  }
}

// Only CLIENT UNBLOCK gets here: the client is blocked without a Redis timeout.
int on_timeout(RedisModuleCtx* ctx, RedisModuleString**, int) {
  try {
    GenerationJob* job = job_of(rm::GetBlockedClientHandle(ctx));
    const std::string timer_name = std::string(job ? job->command : "infer.generate") + " unblocked";
    MainThreadTimer timer(timer_name.c_str());
    if (job) {
      job->unblocked = true;
      job->slot->cancel();  // the engine still finishes it (Cancelled) and on_done unblocks
    }
    return reply_coded_error(ctx, "UNBLOCKED", "client unblocked; generation cancelled");
  } catch (...) {
    return rm::ReplyWithError(ctx, "UNBLOCKED client unblocked; generation cancelled");
  }
}

void on_disconnect(RedisModuleCtx*, RedisModuleBlockedClient* bc) {
  try {
    if (GenerationJob* job = job_of(bc)) job->slot->cancel();
    ++stats().disconnects;
  } catch (...) {
  }
}

void free_job(RedisModuleCtx* ctx, void* privdata) {
  auto* job = static_cast<GenerationJob*>(privdata);
  try {
    const std::string timer_name = std::string(job->command) + " free";
    MainThreadTimer timer(timer_name.c_str());
    live_jobs().erase(job->bc);
    if (job->refusal && job->counted_before_submit) --stats().generate_requests;
    if (replies_from_stream(job)) {
      // The reply callback did not run (disconnect or unblock): the stream still gets its last entry.
      const char* reason = job->unblocked ? "cancelled" : engine::finish_reason_name(job->result.finish);
      job->stream->finish(ctx, reason, job->result.timings.generated_tokens);
    }
  } catch (...) {
  }
  delete job;
}

// Gives back a blocked client whose request was refused on the spot: no callback runs for it.
void abort_generation(GenerationJob* job) {
  live_jobs().erase(job->bc);
  rm::AbortBlock(job->bc);
  delete job;
}

engine::Callbacks callbacks_for(GenerationJob* job) {
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
    unblock_generation(job);
  };
  return cb;
}

}  // namespace

GenerationOptions default_generation_options() {
  GenerationOptions o;
  o.max_tokens = settings().default_max_tokens;
  o.timeout_ms = settings().timeout_ms;
  return o;
}

bool is_generation_option(const RedisModuleString* s) {
  for (const char* k : kSamplingKeywords)
    if (is_word(s, k)) return true;
  return is_word(s, "WITHSTATS") || is_word(s, "STREAM");
}

OptionParse parse_generation_option(RedisModuleString** argv, int argc, int* i, GenerationOptions* o,
                                    std::string* err, unsigned extras) {
  const Settings& s = settings();
  RedisModuleString* w = argv[*i];
  if ((extras & kWithStats) && is_word(w, "WITHSTATS")) {
    o->with_stats = true;
    return OptionParse::Parsed;
  }
  const char* name = (extras & kStream) && is_word(w, "STREAM") ? "STREAM" : nullptr;
  for (const char* k : kSamplingKeywords)
    if (is_word(w, k)) name = k;
  if (!name) return OptionParse::NotOption;
  if (*i + 1 >= argc) return *err = std::string(name) + " needs a value", OptionParse::Error;
  RedisModuleString* v = argv[++*i];
  long long n = 0;
  double d = 0;
  bool ok = true;
  if (is_word(w, "MAXTOKENS")) {
    ok = parse_int(v, 1, s.max_tokens, "MAXTOKENS", &o->max_tokens, err);
  } else if (is_word(w, "TEMP")) {
    ok = parse_real(v, 0, 100, "TEMP", &d, err);
    o->sampling.temperature = static_cast<float>(d);
  } else if (is_word(w, "TOPK")) {
    ok = parse_int(v, 0, 1 << 24, "TOPK", &n, err);
    o->sampling.top_k = static_cast<int>(n);
  } else if (is_word(w, "TOPP")) {
    ok = parse_real(v, 0, 1, "TOPP", &d, err);
    o->sampling.top_p = static_cast<float>(d);
  } else if (is_word(w, "MINP")) {
    ok = parse_real(v, 0, 1, "MINP", &d, err);
    o->sampling.min_p = static_cast<float>(d);
  } else if (is_word(w, "REPEAT-PENALTY")) {
    ok = parse_real(v, 0, 100, "REPEAT-PENALTY", &d, err);
    o->sampling.repeat_penalty = static_cast<float>(d);
  } else if (is_word(w, "SEED")) {
    ok = parse_int(v, 0, LLONG_MAX, "SEED", &n, err);
    o->sampling.seed = static_cast<uint64_t>(n);
  } else if (is_word(w, "STOP")) {
    if (view(v).empty()) return *err = "STOP string must not be empty", OptionParse::Error;
    if (static_cast<int>(o->stop.size()) >= kMaxStops) return *err = "at most 16 STOP strings", OptionParse::Error;
    o->stop.push_back(str(v));
  } else if (is_word(w, "TIMEOUT")) {
    ok = parse_int(v, 0, 86400000, "TIMEOUT", &o->timeout_ms, err);
  } else {  // STREAM
    if (o->stream_key) return *err = "STREAM given twice", OptionParse::Error;
    o->stream_key = v;
    o->stream_key_pos = *i;
  }
  return ok ? OptionParse::Parsed : OptionParse::Error;
}

void apply_generation_options(const GenerationOptions& o, engine::Request* req) {
  req->sampling = o.sampling;
  req->max_tokens = static_cast<int>(o.max_tokens);
  req->stop = o.stop;
  if (o.timeout_ms > 0) req->deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.timeout_ms);
}

void HandleSlot::set(engine::Handle h) {
  std::lock_guard<std::mutex> lock(mu_);
  handle_ = std::move(h);
  if (cancel_requested_) handle_.cancel();
}

void HandleSlot::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancel_requested_ = true;
  if (handle_) handle_.cancel();
}

bool HandleSlot::cancel_requested() {
  std::lock_guard<std::mutex> lock(mu_);
  return cancel_requested_;
}

void configure_generation(RedisModuleCtx* ctx, GenerationJob* job, const GenerationOptions& o) {
  job->timeout_ms = o.timeout_ms;
  job->with_stats = o.with_stats;
  if (o.stream_key)
    job->stream = std::make_shared<StreamWriter>(o.stream_key, rm::GetSelectedDb(ctx), settings().stream_maxlen);
}

GenerationJob* block_generation(RedisModuleCtx* ctx, std::unique_ptr<GenerationJob> owned) {
  GenerationJob* job = owned.release();  // owned by the blocked client from here: free_job deletes it
  // Timeout 0: see the header (TIMEOUT is the engine's deadline, never a Redis block timeout).
  job->bc = rm::BlockClient(ctx, on_reply, on_timeout, free_job, 0);
  rm::SetDisconnectCallback(job->bc, on_disconnect);
  rm::BlockedClientMeasureTimeStart(job->bc);
  live_jobs()[job->bc] = job;
  return job;
}

void unblock_generation(GenerationJob* job) {
  rm::BlockedClientMeasureTimeEnd(job->bc);
  rm::UnblockClient(job->bc, job);
}

std::string check_fits_context(const LoadedModel& m, size_t n_prompt, long long max_tokens) {
  const long long need = static_cast<long long>(n_prompt) + max_tokens;
  if (need <= m.engine->options().context) return "";
  return "prompt of " + std::to_string(n_prompt) + " tokens plus MAXTOKENS " + std::to_string(max_tokens) +
         " exceeds the context of " + std::to_string(m.engine->options().context);
}

int start_generation(RedisModuleCtx* ctx, std::unique_ptr<GenerationJob> owned, engine::Request req,
                     std::string suffix) {
  GenerationJob* job = block_generation(ctx, std::move(owned));
  engine::Callbacks cb = callbacks_for(job);
  // Tokenising (prompt text, suffix) and Engine::submit (validation, queueing, waking the scheduler)
  // run on the background thread: the main thread only parses, copies token keys and blocks the
  // client, which keeps its time per command small and independent of the prompt. A refusal there
  // (BUSY included) is replied by on_reply. Once submit succeeds the request may finish and the job be
  // freed at any time: only the slot (shared) is touched after it.
  auto task = [job, slot = job->slot, req = std::move(req), cb = std::move(cb), suffix = std::move(suffix)]() mutable {
    if (!suffix.empty()) {
      tokenizer::EncodeOptions o;
      o.add_special = false;
      std::vector<int32_t> ids = job->model->engine->tokenizer().encode(suffix, o);
      req.prompt_ids.insert(req.prompt_ids.end(), ids.begin(), ids.end());
      if (std::string e = check_fits_context(*job->model, req.prompt_ids.size(), req.max_tokens); !e.empty()) {
        job->refusal = engine::SubmitError{engine::SubmitError::Kind::Invalid, std::move(e), 0};
        return unblock_generation(job);
      }
    }
    auto submitted = job->model->engine->submit(std::move(req), std::move(cb));
    if (auto* refusal = std::get_if<engine::SubmitError>(&submitted)) {
      job->refusal = *refusal;  // no callback will run: the job is still ours
      unblock_generation(job);
    } else {
      slot->set(std::get<engine::Handle>(submitted));
    }
  };
  job->counted_before_submit = true;
  if (!run_in_background(std::move(task))) {
    abort_generation(job);
    return reply_coded_error(ctx, "BUSY", "too many requests waiting to be submitted; retry later");
  }
  ++stats().generate_requests;
  return REDISMODULE_OK;
}

void submit_generation(GenerationJob* job, engine::Request req) {
  auto submitted = job->model->engine->submit(std::move(req), callbacks_for(job));
  if (auto* refusal = std::get_if<engine::SubmitError>(&submitted)) {
    job->refusal = *refusal;  // no callback will run: the job is still ours
    return unblock_generation(job);
  }
  job->slot->set(std::get<engine::Handle>(submitted));
  ++stats().generate_requests;
}

}  // namespace infer::redis
