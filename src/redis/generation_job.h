// What INFER.GENERATE and INFER.RAG share: the generation options of their grammar, and a generation
// run on a blocked client (blocked_call.h has the sequence and who owns the job when):
//   main thread: block the client (block_client), submit (start_generation / submit_generation);
//   engine thread: on_token feeds the optional StreamWriter, on_done stores the result and completes;
//   main thread: the stream's final entry from the write queue, then the reply.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/chat_prompt.h"
#include "redis/blocked_call.h"
#include "redis/chat_args.h"
#include "redis/models.h"
#include "redis/module_api.h"
#include "redis/semantic_cache.h"
#include "redis/stream_writer.h"
#include "redis/tool_reply.h"

namespace infer::redis {

// The language the output is constrained to: FORMAT json (any JSON value), JSONSCHEMA <schema>,
// GRAMMAR <gbnf>; at most one per command.
enum class OutputConstraint { None, Json, Schema, Grammar };
// The longest JSONSCHEMA or GRAMMAR text accepted, in bytes.
inline constexpr size_t kMaxConstraintBytes = 256 * 1024;

// MAXTOKENS TEMP TOPK TOPP MINP REPEAT-PENALTY SEED STOP TIMEOUT LOGPROBS FORMAT JSONSCHEMA GRAMMAR [WITHSTATS]
// [STREAM key] [CACHE key [THRESHOLD s] [TTL seconds] [SAMPLED]].
struct GenerationOptions {
  engine::SamplingParams sampling;
  long long max_tokens = 0;  // tokens
  std::vector<std::string> stop;
  long long timeout_ms = 0;  // 0: no deadline
  int logprobs = -1;         // LOGPROBS n: -1 off, else alternatives per token (engine::Request::logprobs)
  bool with_stats = false;
  RedisModuleString* stream_key = nullptr;  // the handler's argv: valid during the handler only
  int stream_key_pos = -1;                  // its argv index, for key-position queries
  OutputConstraint constraint = OutputConstraint::None;
  RedisModuleString* constraint_text = nullptr;  // JSONSCHEMA / GRAMMAR value: the handler's argv
  unsigned given = 0;                       // the single-valued options parsed so far (bit per keyword)
  CacheOptions cache;                       // CACHE (semantic_cache.h): cache.key null when not given
};

// The options with the module's defaults (infer.default-max-tokens, infer.timeout-ms). Main thread.
GenerationOptions default_generation_options();

// Options beyond the sampling ones that a command accepts (bit set for parse_generation_option).
enum GenerationExtras : unsigned { kNoExtras = 0, kWithStats = 1, kStream = 2, kCache = 4 };

// True when s is a generation keyword (of any set): ends INFER.GENERATE's TOKENS key lists.
bool is_generation_option(const RedisModuleString* s);

enum class OptionParse { NotOption, Parsed, Error };
// Parses the option at argv[*i] into o and leaves *i on its last argument. NotOption: argv[*i] is not
// a generation option (of `extras`) and nothing changed. Error: err says what is wrong.
OptionParse parse_generation_option(RedisModuleString** argv, int argc, int* i, GenerationOptions* o,
                                    std::string* err, unsigned extras);

// The largest MAXTOKENS x (LOGPROBS + 1) accepted: the reply's log-probabilities are written on the
// main thread (MainThreadBudget.LogprobsReplyAtTheLargestAccepted).
inline constexpr long long kMaxLogprobEntries = 8192;
// Checks what single options cannot: the log-probabilities a reply may hold. "" or the error.
std::string check_generation_options(const GenerationOptions& o);

// "unknown option 'x'" for argv[i], naming the STREAM key when x follows it ("STREAM PROMPT x").
std::string unknown_option(RedisModuleString** argv, int i, const GenerationOptions& o);

// Refuses a STREAM that cannot be written: on a replica (-READONLY) or a key of another type
// (-WRONGTYPE). Replies and returns true when refused; false without STREAM. Main thread.
bool refuse_stream_key(RedisModuleCtx* ctx, const GenerationOptions& o);

// Adds the options that change a generation's answer to a cache fingerprint (sampling, MAXTOKENS, STOP,
// LOGPROBS, the output constraint; not TIMEOUT, WITHSTATS or STREAM). Main thread.
void add_generation_fingerprint(Fingerprint* f, const GenerationOptions& o);

// Why CACHE is bypassed for these options ("" when it is not): TEMP > 0 without SAMPLED, LOGPROBS.
const char* cache_bypass_reason(const GenerationOptions& o);

// Copies sampling, max tokens, stop strings and LOGPROBS into req, and sets its deadline to now + timeout.
void apply_generation_options(const GenerationOptions& o, engine::Request* req);

// One blocked client's generation. Commands with more state or more reply fields derive from it.
struct GenerationJob : BlockedJob {
  GenerationJob(std::shared_ptr<const LoadedModel> m, const char* command_name)
      : BlockedJob(command_name, "generation"), model(std::move(m)) {}
  ~GenerationJob() override;
  // Holds an argument of the command (not copied) until the job is freed and returns its bytes, for
  // work done off the main thread. Main thread.
  std::string_view hold(RedisModuleString* arg);
  // Fields a command adds to the map reply after "text" (and the WITHSTATS and LOGPROBS ones): how many
  // pairs, and writing them. A job with extra fields always replies with a map. Main thread.
  virtual int extra_reply_fields() const { return 0; }
  virtual void reply_extra_fields(RedisModuleCtx*) const {}
  // A cache hit: fills the result (and the STREAM) from a cache entry's attributes; false when the entry
  // cannot be read. Any thread, before the job completes. save_cached writes the answer into an entry.
  virtual bool load_cached(const nlohmann::json& entry);
  virtual void save_cached(nlohmann::ordered_json& entry) const;

  int reply(RedisModuleCtx* ctx) override;
  bool has_writes() const override;              // a STREAM gets its final entry
  void write(RedisModuleCtx* ctx, Writable writable) override;
  void settle() override;  // a request counted before a refused submit is uncounted

  std::shared_ptr<const LoadedModel> model;  // keeps the engine alive until the job is freed
  const char* timeout_subject = "generation";  // "-TIMEOUT <subject> did not finish within N ms"
  long long timeout_ms = 0;
  bool with_stats = false;
  int logprobs = -1;  // LOGPROBS given (>= 0): the map reply gets a `logprobs` field
  std::shared_ptr<StreamWriter> stream;
  OutputConstraint constraint = OutputConstraint::None;
  std::string_view constraint_text;  // held (hold()): compiled on a background thread before submit
  std::optional<engine::SubmitError> refusal;  // submit refused after blocking: replied
  bool counted_before_submit = false;          // generate_requests counted when queued in the background
  const char* error_code = "ERR";              // error set: replied instead of the result
  std::string error;
  engine::Result result;   // written by on_done before complete()
  // A chat's tools (null without TOOLS) and the model template it was rendered through (nullptr for a
  // built-in format or no chat; it lives as long as `model`). Written off the main thread while the
  // prompt is prepared, before submit; read after completion.
  nlohmann::ordered_json tools;
  const engine::ChatTemplateEntry* chat_template = nullptr;
  ToolChoice tool_choice;  // TOOLCHOICE, recorded with the tools
  // The calls parsed from the result (tool_reply.h), set by on_done when there are any: the reply and the
  // STREAM's final entry carry them.
  std::optional<chat::ParsedReply> tool_reply;
  // CACHE: given (WITHSTATS replies `cached`), and the lookup and store; `cache` is null when CACHE was
  // not given or the request bypasses it (TEMP > 0 without SAMPLED, LOGPROBS).
  bool cache_given = false;
  std::unique_ptr<CacheRequest> cache;
  engine::Request pending;  // the generation, prepared, while its prompt is looked up in the cache

 private:
  bool stores_in_cache() const;
  void write_stream(RedisModuleCtx* ctx, Writable writable);

  std::vector<RedisModuleString*> held_;  // freed with the job, on the main thread
};

// Sets job's options (timeout, WITHSTATS, LOGPROBS, STREAM writer in the client's database, the output
// constraint's text held, the CACHE request under `cache_fingerprint` unless bypassed). Main thread.
void configure_generation(RedisModuleCtx* ctx, GenerationJob* job, const GenerationOptions& o,
                          const std::string& cache_fingerprint = "");

// Refuses a CACHE that cannot work: a key of another type (-WRONGTYPE), fingerprinted option text (the
// chat's TOOLS and CHATARGS, the output constraint) over kMaxFingerprintedBytes, an embedder that cannot
// embed. Replies and returns true when refused. Main thread.
bool refuse_cache_key(RedisModuleCtx* ctx, const GenerationOptions& o, const ChatOptions& chat,
                      const LoadedModel& embedder);
// TOOLS, CHATARGS, JSONSCHEMA and GRAMMAR are hashed into CACHE's fingerprint on the main thread: at most
// this many bytes of them in all.
inline constexpr size_t kMaxFingerprintedBytes = 1 << 20;

// Work on a background thread that completes req's prompt from text the job holds (the prompt text,
// a suffix to tokenise, chat messages), before it is submitted; returns "" or why the request is refused.
using PreparePrompt = std::function<std::string(engine::Request& req)>;

// INFER.GENERATE's path: blocks the client, then runs `prepare` (if any), compiles the job's output
// constraint (if any) and submits req on a background thread, in the lane of `text_bytes` (the text
// prepare and submit tokenise, plus the constraint's; background.h). With a CACHE request the prepared
// prompt is embedded by the model and looked up first; only a miss compiles and submits.
// Refusals are replied by the reply callback. Main thread; returns REDISMODULE_OK.
int start_generation(RedisModuleCtx* ctx, std::unique_ptr<GenerationJob> job, engine::Request req,
                     size_t text_bytes, PreparePrompt prepare = {});

// Submits req for a job already blocked (INFER.RAG after retrieval, a cache miss) the way
// start_generation does, on a background thread; a refusal (BUSY included) unblocks the job and is
// replied by the reply callback. Main thread.
void submit_generation(GenerationJob* job, engine::Request req);

}  // namespace infer::redis
