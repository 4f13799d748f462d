#include "engine/decode_step.h"

#include <utility>

namespace infer::engine {

std::string generated_piece(const tokenizer::Tokenizer& tok, int32_t id) {
  return tok.token_to_piece(id, /*remove_special=*/true);
}

DecodeStep::DecodeStep(const SamplingParams& sampling, int n_vocab, const tokenizer::Tokenizer* tok,
                       std::vector<std::string> stop, bool end_on_eog,
                       std::function<void(const std::string&)> on_text)
    : sampler_(sampling, n_vocab), n_vocab_(n_vocab), tok_(tok), end_on_eog_(end_on_eog), text_(std::move(stop), std::move(on_text)) {}

void DecodeStep::enable_logprobs(int n_top) { logprob_row_.emplace(n_top); }

int32_t DecodeStep::sample(const float* logits, std::span<const int32_t> history) {
  if (logprob_row_) logprob_row_->observe(logits, n_vocab_);  // the raw row: nothing has changed it yet
  const int32_t id = sampler_.sample(logits, history);
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
  if (end_on_eog_ && tok_->is_eog(id)) return Outcome::EndOfGeneration;
  return text_.add(generated_piece(*tok_, id)) ? Outcome::StopString : Outcome::Continue;
}

}  // namespace infer::engine
