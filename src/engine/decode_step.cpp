#include "engine/decode_step.h"

#include <stdexcept>
#include <utility>

namespace infer::engine {

std::string generated_piece(const tokenizer::Tokenizer& tok, int32_t id) {
  return tok.token_to_piece(id, /*remove_special=*/true);
}

DecodeStep::DecodeStep(const SamplingParams& sampling, int n_vocab, const tokenizer::Tokenizer* tok,
                       std::vector<std::string> stop, bool end_on_eog,
                       std::function<void(const std::string&)> on_text,
                       std::shared_ptr<const grammar::CompiledGrammar> grammar)
    : sampler_(sampling, n_vocab), n_vocab_(n_vocab), tok_(tok), end_on_eog_(end_on_eog),
      text_(std::move(stop), std::move(on_text)) {
  if (!grammar) return;
  if (!tok || !end_on_eog) throw std::invalid_argument("a grammar needs the tokenizer and no teacher forcing");
  if (grammar->vocab().fingerprint() != tok->fingerprint())
    throw std::invalid_argument("the grammar was compiled for another vocabulary");
  matcher_.emplace(std::move(grammar));
}

void DecodeStep::enable_logprobs(int n_top) { logprob_row_.emplace(n_top); }

int32_t DecodeStep::sample(const float* logits, std::span<const int32_t> history) {
  if (logprob_row_) logprob_row_->observe(logits, n_vocab_);  // the raw row: nothing has changed it yet
  int32_t id;
  if (!matcher_) {
    id = sampler_.sample(logits, history);
  } else {
    mask_ = matcher_->allowed();
    if (mask_->n_allowed == 0)
      throw std::runtime_error("grammar: no token of the vocabulary can continue the text \"" + text_.text() + "\"");
    id = sampler_.sample(logits, history, mask_->bits);
  }
  if (logprob_row_) logprob_row_->fill(id, logits, tok_, &logprobs_);
  return id;
}

void DecodeStep::score(const float* logits, int32_t id) {
  if (!logprob_row_) return;
  logprob_row_->observe(logits, n_vocab_);
  logprob_row_->fill(id, logits, tok_, &logprobs_);
}

DecodeStep::Outcome DecodeStep::take(int32_t id) {
  if (!tok_) return Outcome::Continue;
  if (matcher_ && !matcher_->accept(id))
    throw std::runtime_error("grammar: token " + std::to_string(id) + " does not continue the text");
  if (end_on_eog_ && tok_->is_eog(id)) return Outcome::EndOfGeneration;
  if (text_.add(generated_piece(*tok_, id))) return Outcome::StopString;
  if (matcher_ && matcher_->complete()) return Outcome::GrammarComplete;
  return Outcome::Continue;
}

}  // namespace infer::engine
