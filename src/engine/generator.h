// Single-sequence generation on one Model: prefill the prompt in chunks, then decode token by token
// with the sampler chain, stopping on end-of-generation tokens, stop strings or max tokens.
// This is what `infer generate` and `infer bench` run; the serving Engine batches many sequences. Each
// generated token goes through a DecodeStep (decode_step.h), as in the Engine, so both give the same text.
//
// Text streaming: the callback receives pieces of valid UTF-8 only (a character split across tokens
// is held back until complete) and never any part of a stop string (text that could still become
// one is held back until it cannot).
//
// The forward pass runs on a model::Backend (GeneratorOptions::device) that owns the KV pages.
//
// Thread-safety: a Generator owns its backend (KV pool and scratch); one generate() at a time per
// Generator.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat_prompt.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "kernels/runtime/thread_pool.h"
#include "model/backend.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace infer::engine {

struct GenerateOptions {
  SamplingParams sampling;
  // Tokens to generate at most. 0 is allowed: no token is produced, only prompt logits (when asked).
  int max_tokens = 128;
  std::vector<std::string> stop;  // stop strings; the text ends before the first match
  // Teacher forcing: when non-empty, step s feeds force[s] instead of a sampled token; exactly
  // force.size() steps run (max_tokens, stop strings and end-of-generation tokens are ignored).
  std::vector<int32_t> force;
  // Logits capture: 0 none, N > 0 the N largest per row, -1 all of them (sorted by logit desc,
  // ties lowest id first).
  int logits_top_n = 0;
  bool capture_prompt_logits = false;  // one list per prompt position (predicting the next token)
  // Per-token log-probabilities (as Request::logprobs): -1 off; 0..kMaxLogprobs alternatives per token.
  // Forced tokens are scored too.
  int logprobs = -1;
  // Constrained decoding, as Request::grammar (engine.h); needs the Generator's tokenizer, and no
  // teacher forcing.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

using TopLogits = std::vector<std::pair<int32_t, float>>;

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> ids;  // generated (or forced) ids, end-of-generation token included
  std::string text;          // detokenised generated text, cut before a stop string
  FinishReason finish = FinishReason::Length;
  uint64_t seed = 0;
  double prefill_ms = 0, decode_ms = 0;
  double prefill_tps = 0, decode_tps = 0;  // tokens per second (0 when nothing was timed)
  std::vector<TopLogits> prompt_logits;  // when capture_prompt_logits
  std::vector<TopLogits> step_logits;    // when logits_top_n != 0: one per generation step
  std::vector<TokenLogprobs> logprobs;   // when logprobs >= 0: one per entry of `ids`
};

struct GeneratorOptions {
  int threads = 1;
  int context = 2048;       // max tokens (prompt + generated); capped at the model's training context
  int prefill_chunk = 256;  // prompt rows per forward pass
  model::DeviceOptions device;  // where the forward pass runs (cpu by default)
};

class Generator {
 public:
  // The model must outlive the Generator. `tok` may be null (ids in, ids out; text stays empty).
  // Throws std::runtime_error when the device is not available or the KV pool cannot be allocated,
  // std::invalid_argument for bad options.
  Generator(const model::Model& model, const tokenizer::Tokenizer* tok, const GeneratorOptions& opts);
  ~Generator();

  // Runs one generation from a fresh context. Throws std::invalid_argument (nothing generated) for an
  // empty prompt, token ids out of range, a prompt longer than the context, max_tokens < 0, logprobs
  // outside [-1, kMaxLogprobs] or bad sampling values. `on_text` (may be empty) receives streamed text pieces as they become final.
  GenerateResult generate(const std::vector<int32_t>& prompt_ids, const GenerateOptions& opts,
                          const std::function<void(const std::string&)>& on_text = {});

  // Low-level access for benchmarks: runs `n` tokens at positions pos0.. through the model in
  // prefill_chunk-sized passes, computing logits for the last row only; returns them (n_vocab floats,
  // valid until the next call). Positions must be contiguous with what is already in the cache.
  const float* forward(const int32_t* ids, int n, int pos0);

  int context() const { return n_ctx_; }
  int n_vocab() const;
  const model::Model& model() const { return model_; }
  const model::Backend& backend() const { return *backend_; }

 private:
  // Runs rows [pos0, pos0+n) (n <= prefill_chunk, and <= logit_rows() when want_all), writing logits
  // of all rows (want_all) or of the last one to logits_.
  void run_chunk(const int32_t* ids, int n, int pos0, bool want_all);
  int logit_rows() const;  // rows of logits the buffer holds

  const model::Model& model_;
  const tokenizer::Tokenizer* tok_;
  GeneratorOptions opts_;
  int n_ctx_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<model::Backend> backend_;
  std::vector<int32_t> page_table_;
  std::vector<float> logits_;
  model::Batch batch_;
};

// Tokenises `text` for `tok` (BOS per the vocab, special tokens parsed). With `chat`, wraps it as one
// user turn with the assistant prompt open, as tokenize_chat does; `template_name` picks a template
// ("" the model's default). Throws std::runtime_error (ChatError) when the chat cannot be rendered.
std::vector<int32_t> tokenize_prompt(const tokenizer::Tokenizer& tok, const std::string& text, bool chat,
                                     const std::string& template_name = "");

// The prompt ids of a chat, as the server makes them (chat_prompt.h): rendered through the model's
// template (parsed here, once per call), or the built-in format `chat.template_name` names for a model
// without one, then tokenised with special tokens parsed and BOS only when the rendering lacks it.
// Throws ChatError.
std::vector<int32_t> tokenize_chat(const tokenizer::Tokenizer& tok, const ChatRequest& chat);

}  // namespace infer::engine
