// The serving engine: one loaded model shared by many concurrent requests through continuous
// batching over a paged KV cache with a radix prefix cache. No Redis inside.
//
// Threads: submit()/cancel()/stats() are thread-safe and never block on inference. Callbacks run on
// the engine's scheduler thread: they must be cheap and must not call back into the engine
// synchronously except Handle::cancel().
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/latency_window.h"
#include "model/backend.h"
#include "model/pass_profile.h"
#include "tokenizer/tokenizer.h"

namespace infer::grammar {
class CompiledGrammar;
}

namespace infer::engine {

// The device and KV-cache vocabulary of EngineOptions (model/backend.h), named here for the front ends,
// which reach the model and device layers only through the engine.
using model::device_name;
using model::DeviceKind;
using model::DeviceOptions;
using model::KvType;
using model::kv_type_name;
using model::parse_device;
using model::parse_kv_type;

class ModelChatTemplates;  // chat_prompt.h

struct SamplingParams {
  float temperature = 0.8f;  // 0 → greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off
  float repeat_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int penalty_last_n = 64;
  std::optional<uint64_t> seed;  // random (and reported) when absent
};

enum class FinishReason { Stop, Length, Cancelled, Deadline, Error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", ...

// How an embedding request pools the prompt's hidden states (final-normed; bert: the last layer's output).
enum class Pooling {
  Default,  // the model's GGUF <arch>.pooling_type: 0 None, 1 Mean, 2 Cls, 3 Last; absent or other: Last
  Last,     // the last prompt token's state (decoder embedding models: qwen3 family)
  Mean,     // the average over every prompt position; such a request computes every position itself
            // (no prefix-cache reuse: cached positions have no hidden states)
  Cls,      // the first position's state (bert's [CLS]); computed by the request, like Mean
  None,     // every prompt position's state, unpooled, like Mean
};

// Per-token log-probabilities (Request::logprobs): the log-softmax of the raw logits row a token was
// drawn from, before penalties, top-k/top-p/min-p, temperature or any constraint (what llama-server and
// OpenAI report). A piece is the token's bytes as token_to_piece gives them with special tokens shown
// ("</s>"); a UTF-8 character split across tokens leaves partial bytes in each.
inline constexpr int kMaxLogprobs = 20;  // alternatives per token at most

struct TokenAlternative {
  int32_t id = -1;
  std::string piece;
  float logprob = 0;
};

struct TokenLogprobs {
  int32_t id = -1;  // the generated token
  std::string piece;
  float logprob = 0;
  std::vector<TokenAlternative> top;  // the most likely tokens, most likely first (ties: lowest id first)
};

struct Request {
  std::string prompt_text;               // tokenised by the engine (BOS per vocab) when prompt_ids empty
  std::vector<int32_t> prompt_ids;       // used as-is when non-empty
  SamplingParams sampling;
  int max_tokens = 128;
  std::vector<std::string> stop;         // stop strings (not included in the output text)
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  bool embedding = false;                // prefill only; result carries the embedding (see Result)
  Pooling pooling = Pooling::Default;    // embeddings: which states are pooled (see Pooling)
  bool normalize = true;                 // embeddings: L2-normalise the pooled vector (None: each row)
  int priority = 0;                      // higher first; FIFO within a priority
  int logprobs = -1;                     // -1 off; 0..kMaxLogprobs: each generated token's log-probability
                                         // and this many alternatives (Result::logprobs)
  // Constrained decoding (grammar/compiled_grammar.h), compiled for this engine's vocabulary; null:
  // none. Only tokens that keep the text a prefix of the grammar's language are drawn, end-of-generation
  // only where it may end, and its completion ends the request (FinishReason::Stop).
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

struct Timings {
  double queue_ms = 0;        // submit → admitted
  double ttft_ms = 0;         // submit → first token
  double prefill_tps = 0;
  double decode_tps = 0;
  int prompt_tokens = 0;
  int cached_tokens = 0;      // prompt tokens reused from the prefix cache
  int generated_tokens = 0;
};

struct Result {
  FinishReason finish = FinishReason::Stop;
  std::string error;          // set when finish == Error
  std::string text;
  std::vector<int32_t> ids;   // generated ids (an end-of-generation token is not included)
  std::vector<float> embedding;  // n_embd floats, or with Pooling::None n_prompt rows of n_embd
  uint64_t seed = 0;          // the seed actually used
  std::vector<TokenLogprobs> logprobs;  // with Request::logprobs >= 0: one per entry of `ids`
  Timings timings;
};

struct Callbacks {
  // One produced token and its text piece (may be empty while a UTF-8 sequence is incomplete or the
  // text could still be the start of a stop string). Result.text is authoritative: text held back when
  // generation ends appears there only. End-of-generation tokens are not reported. `logprobs` is the
  // token's entry of Result::logprobs (valid during the call) with Request::logprobs >= 0, else null.
  std::function<void(int32_t id, const std::string& piece, const TokenLogprobs* logprobs)> on_token;
  // Exactly once per accepted request, last.
  std::function<void(Result&&)> on_done;
  // Optional hook (tests, diagnostics): the logits row (n_vocab floats, valid during the call) from
  // which generated token number `step` (0 = first) is about to be sampled. Costs nothing when unset.
  std::function<void(int step, const float* logits, int n_vocab)> on_logits;
};

// Immediate refusals from submit().
struct SubmitError {
  enum class Kind { Busy, Invalid } kind;
  std::string message;
  int retry_after_ms = 0;   // Busy only: estimate from current throughput
};

class Handle {
 public:
  Handle() = default;
  void cancel() const;       // idempotent; the request finishes with Cancelled at the next step
  uint64_t id() const;
  explicit operator bool() const { return state_ != nullptr; }
  struct State;
  explicit Handle(std::shared_ptr<State> s) : state_(std::move(s)) {}
 private:
  std::shared_ptr<State> state_;
};

struct EngineOptions {
  std::string model_path;
  bool mmap = false;           // map the model file instead of copying it into huge pages (see LoadOptions)
  int threads = 0;             // compute threads; 0 = hardware concurrency
  int max_running = 8;         // concurrent sequences
  int queue_depth = 16;        // waiting requests
  int context = 4096;          // max tokens per sequence (prompt + generated)
  int kv_tokens = 0;           // KV pool size in tokens; 0 = from kv_bytes, else max_running full contexts
  uint64_t kv_bytes = 0;       // KV pool budget in bytes when kv_tokens is 0 (see kv_bytes_per_token)
  int page_tokens = 16;
  int step_tokens = 512;       // per-step token budget (decode rows + prefill chunks)
  bool prefix_cache = true;
  int nice = 0;                // niceness (0..19) of the scheduler and compute threads: a host such as
                               // Redis raises it so that its own main thread wins a shared core
  bool profile = false;        // time the phases of decode steps too (EngineStats::decode_profile)
  model::DeviceOptions device; // where the forward pass runs and the KV pages live (cpu by default)
};
// Engine::create resolves the options it was given: threads (0 → hardware concurrency), context
// (capped at the model's training context), kv_tokens (0 → kv_bytes / bytes per token when kv_bytes is
// set, else room for max_running sequences of the full context, each in whole pages; rounded up to
// whole pages); options() returns the resolved values.

// The steps that ran decode rows only (no prefill chunk), summed: how many, their rows and wall time
// (always counted: the steady decode rate is rows / wall_s), and with EngineOptions::profile where
// that time went: the forward pass by phase, then sampling, callbacks and bookkeeping.
struct DecodeProfile {
  uint64_t steps = 0, rows = 0;
  double wall_s = 0;        // the steps' wall time: the pass and everything after it
  model::PassProfile forward;
  double after_pass_s = 0;  // sampling, callbacks and finishing requests

  // Adds another total (of this engine or another: serve-bench sums its repeats).
  void add(const DecodeProfile& o) {
    steps += o.steps;
    rows += o.rows;
    wall_s += o.wall_s;
    forward.accumulate(o.forward);
    after_pass_s += o.after_pass_s;
  }
  // What this total added since an earlier one of the same engine.
  DecodeProfile since(const DecodeProfile& earlier) const {
    DecodeProfile d = *this;
    d.steps -= earlier.steps;
    d.rows -= earlier.rows;
    d.wall_s -= earlier.wall_s;
    d.forward.accumulate(earlier.forward, -1);
    d.after_pass_s -= earlier.after_pass_s;
    return d;
  }
};

struct EngineStats {
  int queued = 0, running = 0;
  uint64_t completed = 0, rejected_busy = 0, timeouts = 0, cancelled = 0, errors = 0;
  uint64_t tokens_generated = 0, prompt_tokens = 0, cached_tokens = 0;
  double decode_tps = 0;       // recent aggregate
  int kv_pages_total = 0, kv_pages_used = 0;
  int kv_pages_cached = 0;     // of the used pages, those only the prefix cache holds (no running request
                               // uses them; evicted on demand): used - cached are the requests' own
  uint64_t cache_lookups = 0, cache_hits = 0, cache_evictions = 0;
  uint64_t kv_bytes = 0, model_bytes = 0;  // the KV pool's bytes (pages and their padding); weight bytes
  uint64_t kv_bytes_per_token = 0;  // layers × 2 (K and V) × a row's bytes (F16: kv_dim × 2; Q8_0, Q4_0: blocks)
  kernels::KvType kv_type = kernels::KvType::F16;  // how the KV pages store keys and values
  int interleaved_matrices = 0;  // weight matrices in the interleaved layout (model::Model)
  int kv_page_tokens = 0;      // tokens per KV page
  int max_seq_tokens = 0;      // per-sequence cap (prompt + generated): the resolved context
  model::DeviceKind device = model::DeviceKind::Cpu;  // the backend's device
  DecodeProfile decode_profile;  // phases all zero unless EngineOptions::profile
};

// "" when `device` can run a model in this build on this machine, else why not (hosts refuse a load
// before starting it, without reaching into the device layer themselves).
std::string device_unavailable(const model::DeviceOptions& device);

class Engine {
 public:
  // Loads the model and makes its backend (EngineOptions::device) with the KV pool; throws
  // std::runtime_error with a clear message when the device is not available (checked before the model
  // is read), the model cannot be loaded or the pool cannot be allocated.
  static std::unique_ptr<Engine> create(const EngineOptions& opts);
  virtual ~Engine() = default;  // cancels everything still queued or running, then joins

  // Thread-safe, returns immediately. On success the callbacks will run; on error they never run.
  virtual std::variant<Handle, SubmitError> submit(Request req, Callbacks cb) = 0;
  // Prompt length limits, for front ends that tokenise a text themselves (submit does the same): no
  // text too long for the context is tokenised whole. Thread-safe.
  // The most prompt tokens a request may have (the context, less one to generate; step_tokens for a
  // whole-sequence model).
  virtual size_t max_prompt_tokens(bool embedding) const = 0;
  // Why a prompt of n_tokens (at least them, when at_least) is refused; "" when it fits.
  virtual std::string refuse_prompt_length(size_t n_tokens, bool embedding, bool at_least) const = 0;
  // The same for a text, before tokenising it, from Tokenizer::min_tokens; "" when it may fit.
  virtual std::string refuse_prompt_text(std::string_view text, bool embedding) const = 0;
  // Why a prompt of n_prompt tokens (at least them, when at_least) plus max_tokens to generate does not
  // fit the context ("prompt of N tokens plus MAXTOKENS M exceeds the context of C"); "" when it does.
  virtual std::string refuse_generation_length(size_t n_prompt, long long max_tokens, bool at_least) const = 0;

  virtual EngineStats stats() const = 0;
  // Percentiles of the recent requests' latencies (latency_window.h); computed per call.
  virtual LatencySummary latency() const = 0;
  // Drops every prefix-cache page no running request uses. Asynchronous: done before the scheduler's
  // next step (stats().kv_pages_cached shows it); never waits on inference.
  virtual void flush_prefix_cache() = 0;
  virtual int n_vocab() const = 0;
  virtual int n_embd() const = 0;
  virtual bool can_generate() const = 0;  // false for embedding models (bert): they only embed
  // The tokenizer (thread-safe, immutable) and model facts, for front ends.
  virtual const tokenizer::Tokenizer& tokenizer() const = 0;
  // The model's chat templates, parsed when the engine was created (chat_prompt.h).
  virtual const ModelChatTemplates& chat_templates() const = 0;
  virtual const EngineOptions& options() const = 0;
  // The backend's one-line description (device, mode, memory plan), fixed at create.
  virtual const std::string& backend_description() const = 0;
};

}  // namespace infer::engine
