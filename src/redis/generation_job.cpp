// Generation options and the blocked-client run shared by INFER.GENERATE and INFER.RAG
// (see generation_job.h for the pieces and who owns the job when).
#include "redis/generation_job.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <iterator>
#include <utility>

#include "redis/args.h"
#include "redis/background.h"
#include "redis/cluster_slots.h"
#include "redis/output_constraint.h"
#include "redis/settings.h"
#include "redis/stats.h"
#include "redis/stream_registry.h"
#include "redis/vset_type.h"

namespace infer::redis {
namespace {

constexpr const char* kSamplingKeywords[] = {"MAXTOKENS", "TEMP", "TOPK", "TOPP", "MINP",
                                             "REPEAT-PENALTY", "SEED", "STOP", "TIMEOUT", "LOGPROBS"};
constexpr const char* kConstraintKeywords[] = {"FORMAT", "JSONSCHEMA", "GRAMMAR"};
constexpr int kMaxStops = 16;
// Stop strings are copied and matched against the text as it grows: longer ones cost the main thread
// copies of megabytes (MainThreadBudget.LongNamesAndStopStringsAreRefused) and could never match a
// generation's text in practice.
constexpr size_t kMaxStopBytes = 4096;

// A real in (0, max]: the one message for the whole range, as the docs give it.
bool parse_above_zero(const RedisModuleString* v, double max, const char* what, double* out, std::string* err) {
  std::string ignored;
  if (parse_real(v, 0, max, what, out, &ignored) && *out > 0) return true;
  char buf[96];
  snprintf(buf, sizeof buf, "%s must be a number in (0, %g]", what, max);
  *err = buf;
  return false;
}

int reply_refusal(RedisModuleCtx* ctx, const engine::SubmitError& refusal) {
  if (refusal.kind == engine::SubmitError::Kind::Busy) {
    ++stats().busy_replies;
    return reply_coded_error(ctx, "BUSY",
                             refusal.message + "; retry in " + std::to_string(refusal.retry_after_ms) + " ms");
  }
  return reply_error(ctx, refusal.message);
}

// `finish`: the result's reason, or "tool_calls" when the reply carries calls.
void reply_stats_fields(RedisModuleCtx* ctx, const GenerationJob& job, const char* finish) {
  const engine::Result& r = job.result;
  const engine::Timings& t = r.timings;
  rm::ReplyWithCString(ctx, "finish");
  rm::ReplyWithCString(ctx, finish);
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
  if (!job.cache_given) return;
  const bool hit = job.cache && job.cache->outcome == CacheRequest::Outcome::Hit;
  rm::ReplyWithCString(ctx, "cached");
  rm::ReplyWithLongLong(ctx, hit ? 1 : 0);
  if (hit) {
    rm::ReplyWithCString(ctx, "cache_similarity");
    rm::ReplyWithDouble(ctx, job.cache->similarity);
  }
}
constexpr int kStatsFields = 10;
int stats_fields(const GenerationJob& job) {
  if (!job.cache_given) return kStatsFields;
  return kStatsFields + (job.cache && job.cache->outcome == CacheRequest::Outcome::Hit ? 2 : 1);
}

// {id, token, logprob}: a token's piece is its raw bytes (possibly part of a UTF-8 character).
void reply_token(RedisModuleCtx* ctx, int32_t id, const std::string& piece, float logprob, int extra_fields) {
  rm::ReplyWithMap(ctx, 3 + extra_fields);
  rm::ReplyWithCString(ctx, "id");
  rm::ReplyWithLongLong(ctx, id);
  rm::ReplyWithCString(ctx, "token");
  rm::ReplyWithStringBuffer(ctx, piece.data(), piece.size());
  rm::ReplyWithCString(ctx, "logprob");
  rm::ReplyWithDouble(ctx, logprob);
}

// `logprobs`: one map per generated token, {id, token, logprob, top_logprobs: [{id, token, logprob}]}.
void reply_logprobs_field(RedisModuleCtx* ctx, const engine::Result& r) {
  rm::ReplyWithCString(ctx, "logprobs");
  rm::ReplyWithArray(ctx, static_cast<long>(r.logprobs.size()));
  for (const engine::TokenLogprobs& e : r.logprobs) {
    reply_token(ctx, e.id, e.piece, e.logprob, 1);
    rm::ReplyWithCString(ctx, "top_logprobs");
    rm::ReplyWithArray(ctx, static_cast<long>(e.top.size()));
    for (const engine::TokenAlternative& a : e.top) reply_token(ctx, a.id, a.piece, a.logprob, 0);
  }
}

engine::Callbacks callbacks_for(GenerationJob* job) {
  engine::Callbacks cb;
  if (job->stream) {
    std::shared_ptr<StreamWriter> stream = job->stream;
    cb.on_token = [stream](int32_t, const std::string& piece, const engine::TokenLogprobs* logprobs) {
      try {
        stream->append(piece, logprobs);
      } catch (...) {
        // Out of memory while buffering: that piece is missing from the stream, not from the reply.
      }
    };
  }
  cb.on_done = [job](engine::Result&& r) {
    // Engine thread. After complete() the job belongs to the main thread: touch nothing after it.
    job->result = std::move(r);
    const bool finished = job->result.finish == engine::FinishReason::Stop ||
                          job->result.finish == engine::FinishReason::Length;
    if (finished && job->tools.is_array() && job->tool_choice.kind != ToolChoice::Kind::None) {
      try {
        const std::string* source = job->chat_template ? &job->chat_template->source : nullptr;
        job->tool_reply = engine::parse_result_tool_calls(job->model->engine->tokenizer(), source, job->result);
      } catch (const std::exception&) {
        job->tool_reply.reset();  // out of memory while parsing: the text is the reply
      }
    }
    complete(job);
  };
  return cb;
}

}  // namespace

int GenerationJob::reply(RedisModuleCtx* ctx) {
  if (!error.empty()) return reply_coded_error(ctx, error_code, error);
  if (refusal) return reply_refusal(ctx, *refusal);
  const engine::Result& r = result;
  switch (r.finish) {
    case engine::FinishReason::Error:
      return reply_error(ctx, "generation failed: " + r.error);
    case engine::FinishReason::Deadline:
      ++stats().timeouts;
      return reply_coded_error(ctx, "TIMEOUT", std::string(timeout_subject) + " did not finish within " +
                                                   std::to_string(timeout_ms) + " ms");
    case engine::FinishReason::Cancelled:
      return reply_error(ctx, "generation cancelled");
    default:
      break;
  }
  const int extra = extra_reply_fields();
  const bool with_logprobs = logprobs >= 0;
  if (!with_stats && !with_logprobs && extra == 0 && !tool_reply)
    return rm::ReplyWithStringBuffer(ctx, r.text.data(), r.text.size());
  // With calls: text is the content around them, then tool_calls, and finish tool_calls (with the stats
  // when WITHSTATS has them).
  const int tool_fields = tool_reply ? (with_stats ? 1 : 2) : 0;
  rm::ReplyWithMap(ctx, 1 + (with_stats ? stats_fields(*this) : 0) + (with_logprobs ? 1 : 0) + extra + tool_fields);
  const std::string& text = tool_reply ? tool_reply->content : r.text;
  rm::ReplyWithCString(ctx, "text");
  rm::ReplyWithStringBuffer(ctx, text.data(), text.size());
  const char* finish = tool_reply ? "tool_calls" : engine::finish_reason_name(r.finish);
  if (with_stats) reply_stats_fields(ctx, *this, finish);
  if (with_logprobs) reply_logprobs_field(ctx, r);
  reply_extra_fields(ctx);
  if (tool_reply) {
    rm::ReplyWithCString(ctx, "tool_calls");
    reply_tool_calls(ctx, tool_reply->tool_calls);
    if (!with_stats) {
      rm::ReplyWithCString(ctx, "finish");
      rm::ReplyWithCString(ctx, finish);
    }
  }
  return REDISMODULE_OK;
}

GenerationJob::~GenerationJob() {
  for (RedisModuleString* s : held_) rm::FreeString(nullptr, s);
}

std::string_view GenerationJob::hold(RedisModuleString* arg) {
  held_.reserve(held_.size() + 1);  // nothing held is leaked if push_back cannot grow
  RedisModuleString* held = rm::hold_for_threads(arg);
  held_.push_back(held);
  return view(held);
}

bool GenerationJob::stores_in_cache() const {
  return cache && cache->outcome == CacheRequest::Outcome::Miss && !refusal && error.empty() &&
         (result.finish == engine::FinishReason::Stop || result.finish == engine::FinishReason::Length);
}

bool GenerationJob::has_writes() const { return (stream && !refusal && error.empty()) || stores_in_cache(); }

void GenerationJob::write(RedisModuleCtx* ctx, Writable writable) {
  if (stream && !refusal) write_stream(ctx, writable);
  // A node that became a replica stores nothing: its master's entries arrive by replication.
  if (writable == Writable::Yes && stores_in_cache()) cache_store(ctx, this);
}

void GenerationJob::write_stream(RedisModuleCtx* ctx, Writable writable) {
  const char* reason = unblocked ? "cancelled" : tool_reply ? "tool_calls" : engine::finish_reason_name(result.finish);
  std::vector<std::pair<std::string, std::string>> fields;
  if (tool_reply && !unblocked) fields.emplace_back("tool_calls", tool_calls_json(tool_reply->tool_calls));
  stream->finish(ctx, writable, reason, result.timings.generated_tokens, fields);
  if (!error.empty()) return;
  if (writable == Writable::Replica) {
    error_code = "READONLY";
    error = "this node became a replica while the generation ran; STREAM '" + stream->key() +
            "' has no finish entry";
  } else if (const std::string& moved = stream->moved(); !moved.empty()) {
    // The redirection itself ("MOVED 1234 host:port"), so that cluster clients can follow it.
    for (const char* code : {"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"})
      if (moved.rfind(std::string(code) + " ", 0) == 0) error_code = code;
    error = moved.substr(moved.find(' ') + 1);
  }
}

void GenerationJob::settle() {
  if (refusal && counted_before_submit) --stats().generate_requests;
  if (!cache_given) return;
  ModuleStats& s = stats();
  if (!cache)
    ++s.cache_bypassed;
  else if (cache->outcome == CacheRequest::Outcome::Hit)
    ++s.cache_hits;
  else if (cache->outcome == CacheRequest::Outcome::Miss)
    ++s.cache_misses;
}

bool GenerationJob::load_cached(const nlohmann::json& e) {
  engine::Result r;
  r.text = bytes_of(e.at("text"));
  const std::string finish = e.at("finish").get<std::string>();
  if (finish != "stop" && finish != "length") return false;
  r.finish = finish == "stop" ? engine::FinishReason::Stop : engine::FinishReason::Length;
  r.ids = e.at("ids").get<std::vector<int32_t>>();
  r.timings.prompt_tokens = e.at("prompt_tokens").get<int>();
  r.timings.generated_tokens = static_cast<int>(r.ids.size());
  r.seed = e.at("seed").get<uint64_t>();
  if (auto t = e.find("tool_reply"); t != e.end()) {
    chat::ParsedReply p;
    p.content = bytes_of(t->at("content"));
    for (const auto& c : t->at("calls"))
      p.tool_calls.push_back({bytes_of(c.at("id")), bytes_of(c.at("name")), bytes_of(c.at("arguments"))});
    tool_reply = std::move(p);
  }
  result = std::move(r);
  if (stream) stream->append(result.text);
  return true;
}

void GenerationJob::save_cached(nlohmann::ordered_json& e) const {
  e["text"] = json_bytes(result.text);
  e["finish"] = engine::finish_reason_name(result.finish);
  e["ids"] = result.ids;
  e["prompt_tokens"] = result.timings.prompt_tokens;
  e["seed"] = result.seed;
  if (tool_reply) {
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    for (const chat::ToolCall& c : tool_reply->tool_calls)
      calls.push_back({{"id", json_bytes(c.id)}, {"name", json_bytes(c.name)}, {"arguments", json_bytes(c.arguments)}});
    e["tool_reply"] = {{"content", json_bytes(tool_reply->content)}, {"calls", std::move(calls)}};
  }
}

GenerationOptions default_generation_options() {
  GenerationOptions o;
  o.max_tokens = settings().default_max_tokens;
  o.timeout_ms = settings().timeout_ms;
  return o;
}

bool is_generation_option(const RedisModuleString* s) {
  for (const char* k : kSamplingKeywords)
    if (is_word(s, k)) return true;
  for (const char* k : kConstraintKeywords)
    if (is_word(s, k)) return true;
  return is_word(s, "WITHSTATS") || is_word(s, "STREAM") || is_word(s, "CACHE");
}

namespace {

// FORMAT json | JSONSCHEMA text | GRAMMAR text at argv[*i] (a constraint keyword). Only checks that
// need no parsing happen here: the text is parsed and compiled off the main thread.
OptionParse parse_constraint_option(RedisModuleString** argv, int argc, int* i, GenerationOptions* o,
                                    std::string* err) {
  RedisModuleString* w = argv[*i];
  const char* name = is_word(w, "FORMAT") ? "FORMAT" : is_word(w, "JSONSCHEMA") ? "JSONSCHEMA" : "GRAMMAR";
  if (*i + 1 >= argc) return *err = needs_value(name), OptionParse::Error;
  const OutputConstraint kind = name[0] == 'F' ? OutputConstraint::Json
                                : name[0] == 'J' ? OutputConstraint::Schema
                                                 : OutputConstraint::Grammar;
  if (o->constraint == kind) return *err = std::string(name) + " given twice", OptionParse::Error;
  if (o->constraint != OutputConstraint::None)
    return *err = "FORMAT, JSONSCHEMA and GRAMMAR exclude each other: give one", OptionParse::Error;
  RedisModuleString* v = argv[++*i];
  if (kind == OutputConstraint::Json) {
    if (!is_word(v, "json")) return *err = "FORMAT must be json", OptionParse::Error;
  } else {
    if (view(v).empty()) return *err = std::string(name) + " must not be empty", OptionParse::Error;
    if (view(v).size() > kMaxConstraintBytes)
      return *err = std::string(name) + " of " + std::to_string(view(v).size()) + " bytes is longer than " +
                    std::to_string(kMaxConstraintBytes),
             OptionParse::Error;
    o->constraint_text = v;
  }
  o->constraint = kind;
  return OptionParse::Parsed;
}

}  // namespace

OptionParse parse_generation_option(RedisModuleString** argv, int argc, int* i, GenerationOptions* o,
                                    std::string* err, unsigned extras) {
  const Settings& s = settings();
  RedisModuleString* w = argv[*i];
  for (const char* k : kConstraintKeywords)
    if (is_word(w, k)) return parse_constraint_option(argv, argc, i, o, err);
  if ((extras & kCache) && is_word(w, "CACHE"))
    return parse_cache_option(argv, argc, i, &o->cache, err) ? OptionParse::Parsed : OptionParse::Error;
  if ((extras & kWithStats) && is_word(w, "WITHSTATS")) {
    if (o->with_stats) return *err = "WITHSTATS given twice", OptionParse::Error;
    o->with_stats = true;
    return OptionParse::Parsed;
  }
  const char* name = (extras & kStream) && is_word(w, "STREAM") ? "STREAM" : nullptr;
  unsigned bit = 1u << std::size(kSamplingKeywords);  // STREAM's
  for (size_t k = 0; k < std::size(kSamplingKeywords); ++k)
    if (is_word(w, kSamplingKeywords[k])) name = kSamplingKeywords[k], bit = 1u << k;
  if (!name) return OptionParse::NotOption;
  if (*i + 1 >= argc) return *err = needs_value(name), OptionParse::Error;
  // Every option but STOP takes one value: a second one is a mistake, not an override.
  if (!is_word(w, "STOP")) {
    if (o->given & bit) return *err = std::string(name) + " given twice", OptionParse::Error;
    o->given |= bit;
  }
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
  } else if (is_word(w, "TOPP")) {  // (0, 1]: the sampler's range (1 = off)
    ok = parse_above_zero(v, 1, "TOPP", &d, err);
    o->sampling.top_p = static_cast<float>(d);
  } else if (is_word(w, "MINP")) {
    ok = parse_real(v, 0, 1, "MINP", &d, err);
    o->sampling.min_p = static_cast<float>(d);
  } else if (is_word(w, "REPEAT-PENALTY")) {  // (0, 100]: the sampler divides by it (1 = off)
    ok = parse_above_zero(v, 100, "REPEAT-PENALTY", &d, err);
    o->sampling.repeat_penalty = static_cast<float>(d);
  } else if (is_word(w, "SEED")) {
    ok = parse_int(v, 0, LLONG_MAX, "SEED", &n, err);
    o->sampling.seed = static_cast<uint64_t>(n);
  } else if (is_word(w, "STOP")) {
    if (view(v).empty()) return *err = "STOP string must not be empty", OptionParse::Error;
    if (static_cast<int>(o->stop.size()) >= kMaxStops) return *err = "at most 16 STOP strings", OptionParse::Error;
    if (view(v).size() > kMaxStopBytes)
      return *err = "STOP string of " + std::to_string(view(v).size()) + " bytes is longer than 4096", OptionParse::Error;
    o->stop.push_back(str(v));
  } else if (is_word(w, "TIMEOUT")) {
    ok = parse_int(v, 0, INT_MAX, "TIMEOUT", &o->timeout_ms, err);  // infer.timeout-ms's range
  } else if (is_word(w, "LOGPROBS")) {
    ok = parse_int(v, 0, engine::kMaxLogprobs, "LOGPROBS", &n, err);
    o->logprobs = static_cast<int>(n);
  } else {  // STREAM
    if (is_generation_option(v))  // "STREAM MAXTOKENS 3": the key is missing, not named MAXTOKENS
      return *err = needs_value("STREAM", "a key") + ": '" + str(v) + "' is an option, and a STREAM key may not be named like one",
             OptionParse::Error;
    o->stream_key = v;
    o->stream_key_pos = *i;
  }
  return ok ? OptionParse::Parsed : OptionParse::Error;
}

std::string check_generation_options(const GenerationOptions& o) {
  if (o.logprobs < 0) return "";
  const long long entries = o.max_tokens * (o.logprobs + 1LL);
  if (entries <= kMaxLogprobEntries) return "";
  return "LOGPROBS " + std::to_string(o.logprobs) + " with MAXTOKENS " + std::to_string(o.max_tokens) +
         " could reply " + std::to_string(entries) + " log-probabilities, more than " +
         std::to_string(kMaxLogprobEntries) + " (MAXTOKENS x (LOGPROBS + 1)): lower MAXTOKENS or LOGPROBS";
}

bool refuse_stream_key(RedisModuleCtx* ctx, const GenerationOptions& o) {
  if (!o.stream_key) return false;
  if (rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) {
    reply_coded_error(ctx, "READONLY", "STREAM cannot write on a replica; generate without STREAM");
    return true;
  }
  RedisModuleKey* k = rm::OpenKey(ctx, o.stream_key, REDISMODULE_READ);
  const int type = rm::KeyType(k);
  rm::CloseKey(k);
  if (type == REDISMODULE_KEYTYPE_EMPTY || type == REDISMODULE_KEYTYPE_STREAM) return false;
  reply_coded_error(ctx, "WRONGTYPE", "STREAM key holds a value that is not a stream");
  return true;
}

std::string unknown_option(RedisModuleString** argv, int i, const GenerationOptions& o) {
  std::string e = "unknown option '" + str(argv[i]) + "'";
  if (o.stream_key_pos == i - 1) e += " ('" + str(argv[i - 1]) + "' was taken as the STREAM key)";
  else if (is_cache_word(argv[i])) e += " (THRESHOLD, TTL and SAMPLED follow CACHE key)";
  return e;
}

void apply_generation_options(const GenerationOptions& o, engine::Request* req) {
  req->sampling = o.sampling;
  req->max_tokens = static_cast<int>(o.max_tokens);
  req->stop = o.stop;
  req->logprobs = o.logprobs;
  if (o.timeout_ms > 0) req->deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.timeout_ms);
}

void add_generation_fingerprint(Fingerprint* f, const GenerationOptions& o) {
  const engine::SamplingParams& p = o.sampling;
  f->add_number("temperature", p.temperature);
  f->add_number("top_k", p.top_k);
  f->add_number("top_p", p.top_p);
  f->add_number("min_p", p.min_p);
  f->add_number("repeat_penalty", p.repeat_penalty);
  f->add("seed", p.seed ? std::to_string(*p.seed) : "");
  f->add_number("max_tokens", static_cast<double>(o.max_tokens));
  f->add_number("stops", static_cast<double>(o.stop.size()));
  for (const std::string& stop : o.stop) f->add("stop", stop);
  f->add_number("logprobs", o.logprobs);
  f->add_number("constraint", static_cast<int>(o.constraint));
  f->add("constraint_text", o.constraint_text ? view(o.constraint_text) : std::string_view());
}

const char* cache_bypass_reason(const GenerationOptions& o) {
  if (o.sampling.temperature > 0 && !o.cache.sampled) return "TEMP > 0 without SAMPLED";
  if (o.logprobs >= 0) return "LOGPROBS";
  return "";
}

bool refuse_cache_key(RedisModuleCtx* ctx, const GenerationOptions& o, const ChatOptions& chat,
                      const LoadedModel& embedder) {
  if (!o.cache.key) return false;
  size_t fingerprinted_bytes = 0;
  for (const RedisModuleString* s : {chat.tools, chat.chat_args, o.constraint_text})
    if (s) fingerprinted_bytes += view(s).size();
  RedisModuleKey* k = rm::OpenKey(ctx, o.cache.key, REDISMODULE_READ);
  const int type = rm::KeyType(k);
  const bool is_set = type == REDISMODULE_KEYTYPE_MODULE && rm::ModuleTypeGetType(k) == vset_type();
  rm::CloseKey(k);
  if (type != REDISMODULE_KEYTYPE_EMPTY && !is_set) {
    reply_coded_error(ctx, "WRONGTYPE", "CACHE key holds a value that is not a vector set");
    return true;
  }
  if (fingerprinted_bytes > kMaxFingerprintedBytes) {
    reply_error(ctx, "CACHE: TOOLS, CHATARGS, JSONSCHEMA and GRAMMAR of " + std::to_string(fingerprinted_bytes) +
                         " bytes in all are more than " + std::to_string(kMaxFingerprintedBytes) +
                         ", which the cache's fingerprint may hash on the main thread");
    return true;
  }
  if (embedder.engine->n_embd() <= 0) {
    reply_error(ctx, "CACHE: model '" + embedder.name + "' cannot embed the prompt");
    return true;
  }
  return false;
}

void configure_generation(RedisModuleCtx* ctx, GenerationJob* job, const GenerationOptions& o,
                          const std::string& cache_fingerprint) {
  job->cache_given = o.cache.key != nullptr;
  if (job->cache_given && *cache_bypass_reason(o) == '\0') {
    job->cache = std::make_unique<CacheRequest>(o.cache.key, o.cache, cache_fingerprint);
    job->cache->asked = importing_here(ctx, view(o.cache.key));
  }
  job->timeout_ms = o.timeout_ms;
  job->with_stats = o.with_stats;
  job->logprobs = o.logprobs;
  job->constraint = o.constraint;
  if (o.constraint_text) job->constraint_text = job->hold(o.constraint_text);
  if (o.stream_key) {
    job->stream = std::make_shared<StreamWriter>(o.stream_key, rm::GetSelectedDb(ctx), settings().stream_maxlen,
                                                 job->cancellation, o.logprobs >= 0);
    track_local_stream(ctx, job->stream);
  }
}


namespace {

// TOOLCHOICE required or a name: the output is one call, in the template's format, to the tools the chat
// offered (rendering recorded them on the job). "" or why not.
std::string constrain_to_tool_call(const GenerationJob& job, engine::Request& req) {
  std::string gbnf;
  try {
    gbnf = tool_choice_grammar(job.chat_template ? &job.chat_template->source : nullptr, job.tools, job.tool_choice);
  } catch (const std::exception& e) {
    return e.what();
  }
  std::string why = constrain_request(*job.model, OutputConstraint::Grammar, gbnf, req);
  if (why.rfind("GRAMMAR: ", 0) == 0) why = "TOOLCHOICE: " + why.substr(9);
  return why;
}

void resume_after_cache_miss(GenerationJob* job);

// Main thread (event-loop one-shot): the prompt's embedding is made; look it up.
void lookup_on_main(void* data) {
  auto* job = static_cast<GenerationJob*>(data);
  try {
    RedisModuleCtx* ctx = rm::GetThreadSafeContext(job->bc);  // bound to the client: its database
    cache_lookup(ctx, job, resume_after_cache_miss);
    rm::FreeThreadSafeContext(ctx);
  } catch (const std::exception& e) {
    job->error = std::string("internal error: ") + e.what();
    complete(job);
  }
}

// Background thread, the prompt prepared: the model (or the EMBEDDER, from the prompt's text) embeds it
// as INFER.EMBED without POOLING embeds, and the lookup follows on the main thread. `req` waits in the
// job for a miss.
void embed_for_cache(GenerationJob* job, engine::Request req) {
  engine::Request e;
  e.embedding = true;
  e.pooling = engine::Pooling::Default;
  e.normalize = true;
  e.deadline = req.deadline;
  // Copies: once submit succeeds the embedding may finish and the job be freed at any time (as in
  // background_submit), so only these are touched after it.
  const std::shared_ptr<const LoadedModel> embedder = job->cache->embedder ? job->cache->embedder : job->model;
  const std::shared_ptr<Cancellation> cancellation = job->cancellation;
  if (job->cache->embedder) {
    e.prompt_text = req.prompt_text.empty() ? std::move(job->cache->text) : req.prompt_text;
    if (std::string why = embedder->engine->refuse_prompt_text(e.prompt_text, true); !why.empty()) {
      job->error = "CACHE: EMBEDDER '" + embedder->name + "': " + why;
      return complete(job);
    }
  } else {
    e.prompt_text = req.prompt_text;
    e.prompt_ids = req.prompt_ids;
  }
  job->pending = std::move(req);
  engine::Callbacks cb;
  cb.on_done = [job](engine::Result&& r) {
    // Engine thread. On success the lookup owns the job's next step.
    if (r.finish == engine::FinishReason::Stop && !r.embedding.empty()) {
      job->cache->vector = std::move(r.embedding);
      rm::EventLoopAddOneShot(lookup_on_main, job);
      return;
    }
    if (r.finish == engine::FinishReason::Error) {
      job->error = "CACHE: the prompt's embedding failed: " + r.error;
    } else {
      job->result.finish = r.finish;  // a deadline or a cancel, replied as for a generation
    }
    complete(job);
  };
  auto submitted = embedder->engine->submit(std::move(e), std::move(cb));
  if (auto* refusal = std::get_if<engine::SubmitError>(&submitted)) {
    job->refusal = *refusal;  // no callback will run: the job is still ours
    complete(job);
  } else {
    cancellation->set(std::get<engine::Handle>(submitted));
  }
}

// The background half of a submit: prepare the prompt, compile the output constraint, submit. A refusal
// unblocks the job. Once submit succeeds the request may finish and the job be freed at any time: only
// the cancellation (shared) is touched after it.
auto background_submit(GenerationJob* job, engine::Request req, PreparePrompt prepare) {
  return [job, cancellation = job->cancellation, req = std::move(req), cb = callbacks_for(job),
          prepare = std::move(prepare)]() mutable {
    std::string why;
    try {
      if (prepare) why = prepare(req);
    } catch (const std::exception& e) {
      why = std::string("cannot tokenise the prompt: ") + e.what();
    }
    if (why.empty() && job->cache && job->cache->outcome == CacheRequest::Outcome::Pending)
      return embed_for_cache(job, std::move(req));
    if (why.empty() && job->constraint != OutputConstraint::None)
      why = constrain_request(*job->model, job->constraint, job->constraint_text, req);
    if (why.empty() && job->tool_choice.constrains()) why = constrain_to_tool_call(*job, req);
    if (!why.empty()) {
      job->refusal = engine::SubmitError{engine::SubmitError::Kind::Invalid, std::move(why), 0};
      return complete(job);
    }
    auto submitted = job->model->engine->submit(std::move(req), std::move(cb));
    if (auto* refusal = std::get_if<engine::SubmitError>(&submitted)) {
      job->refusal = *refusal;  // no callback will run: the job is still ours
      complete(job);
    } else {
      cancellation->set(std::get<engine::Handle>(submitted));
    }
  };
}

// Main thread, the job blocked: queues the background half of its submit in the lane of text_bytes
// plus the output constraint's. A request that looks up the cache first is counted when a miss submits
// it. False, with nothing queued, when that lane is full.
bool queue_submit(GenerationJob* job, engine::Request req, size_t text_bytes, PreparePrompt prepare) {
  const bool generates_now = !job->cache || job->cache->outcome != CacheRequest::Outcome::Pending;
  job->counted_before_submit = generates_now;
  if (!run_in_background(text_bytes + job->constraint_text.size(),
                         background_submit(job, std::move(req), std::move(prepare)))) {
    job->counted_before_submit = false;
    return false;
  }
  if (generates_now) ++stats().generate_requests;
  return true;
}

}  // namespace

int start_generation(RedisModuleCtx* ctx, std::unique_ptr<GenerationJob> owned, engine::Request req,
                     size_t text_bytes, PreparePrompt prepare) {
  auto* job = static_cast<GenerationJob*>(block_client(ctx, std::move(owned)));
  // Tokenising (prompt text, suffix), compiling a grammar and Engine::submit (validation, queueing,
  // waking the scheduler) run on a background thread: the main thread only parses, copies token keys
  // and blocks the client, which keeps its time per command small and independent of the prompt. A
  // refusal there (BUSY included) is replied by on_reply.
  if (!queue_submit(job, std::move(req), text_bytes, std::move(prepare))) {
    abort_blocked(job);
    return reply_coded_error(ctx, "BUSY", "too many requests waiting to be submitted; retry later");
  }
  return REDISMODULE_OK;
}

void submit_generation(GenerationJob* job, engine::Request req) {
  if (!queue_submit(job, std::move(req), 0, {})) {
    job->refusal = engine::SubmitError{engine::SubmitError::Kind::Busy, "too many requests waiting to be submitted", 10};
    complete(job);
  }
}

namespace {

// Main thread: the cache had no answer; compile and submit the prepared request.
void resume_after_cache_miss(GenerationJob* job) {
  if (job->cancellation->requested()) {
    job->result.finish = engine::FinishReason::Cancelled;
    return complete(job);
  }
  submit_generation(job, std::move(job->pending));
}

}  // namespace

}  // namespace infer::redis
