// One generated token's step, the same for the CLI's Generator and the serving Scheduler: sample an id,
// then take it: an end-of-generation token ends the text, any other token's text goes to a TextStream,
// which ends it on a stop string. So the CLI and the server produce the same text and ids.
//
// Detokenisation rule (llama.cpp's, as in the reference greedy_text): a generated token's text is its
// piece with control and unknown tokens rendered empty, and the pieces are joined as they are. The
// SentencePiece dummy-prefix space of the first piece is kept, even after a bare BOS: the generated text
// continues the prompt, it does not start a document (Tokenizer::decode is for whole documents).
//
// Constrained decoding: with a grammar, sample() draws only from the tokens its matcher allows (the
// mask is applied to the sampler's own copy of the row: the shared logits are untouched, and a row's
// draw depends on its sequence alone), and take() advances the matcher; the grammar's completion ends
// the text (Outcome::GrammarComplete).
//
// Thread-safety: sample() of different DecodeSteps may run concurrently; everything else on one thread.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "engine/text_stream.h"
#include "grammar/compiled_grammar.h"
#include "tokenizer/tokenizer.h"

namespace infer::engine {

// A generated token's text under the rule above. Throws std::out_of_range for an id outside the vocab.
std::string generated_piece(const tokenizer::Tokenizer& tok, int32_t id);

class DecodeStep {
 public:
  enum class Outcome {
    Continue,         // the token's text (if any) went to the stream; generation goes on
    EndOfGeneration,  // an end-of-generation token: it adds no text
    StopString,       // a stop string is complete: the text ends before it
    GrammarComplete,  // the grammar's language has ended with this token's text (included)
  };

  // `tok` may be null: ids only, no text, no end-of-generation tokens. With `end_on_eog` false (teacher
  // forcing) an end-of-generation token is text like any other. `grammar` (may be null) constrains the
  // draws; it needs `tok` (the vocabulary it was compiled for) and `end_on_eog`. Throws
  // std::invalid_argument for bad sampling values (see Sampler) or a grammar it cannot use.
  DecodeStep(const SamplingParams& sampling, int n_vocab, const tokenizer::Tokenizer* tok,
             std::vector<std::string> stop, bool end_on_eog, std::function<void(const std::string&)> on_text,
             std::shared_ptr<const grammar::CompiledGrammar> grammar = nullptr);

  // Per-token log-probabilities (Request::logprobs): from now on sample() and score() also fill
  // logprobs() from the raw row, before anything else looks at it. Throws std::invalid_argument unless
  // 0 <= n_top <= kMaxLogprobs.
  void enable_logprobs(int n_top);

  // The next id from one row of logits, given every token so far (prompt included). Throws
  // std::runtime_error when the grammar allows no token of the vocabulary here.
  int32_t sample(const float* logits, std::span<const int32_t> history);
  // Teacher forcing: fills logprobs() for `id` as if it had been sampled from `logits`.
  void score(const float* logits, int32_t id);
  // The entry of the token last sampled or scored; null unless enable_logprobs was called.
  TokenLogprobs* logprobs() { return logprob_row_ ? &logprobs_ : nullptr; }
  // Takes the id as generated: what it does to the text (on_text receives what becomes final). Throws
  // std::runtime_error for an id the grammar does not allow.
  Outcome take(int32_t id);
  // End of generation: releases the text held back (see TextStream::finish).
  void finish() { text_.finish(); }

  const std::string& text() const { return text_.text(); }
  uint64_t seed() const { return sampler_.seed(); }

 private:
  Sampler sampler_;
  int n_vocab_;
  std::optional<LogprobRow> logprob_row_;
  TokenLogprobs logprobs_;
  const tokenizer::Tokenizer* tok_;
  bool end_on_eog_;
  TextStream text_;
  std::optional<grammar::GrammarMatcher> matcher_;
  std::shared_ptr<const grammar::TokenMask> mask_;  // the last draw's, kept alive for its bits
};

}  // namespace infer::engine
