#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace infer::engine {

LogprobRow::LogprobRow(int n_top) : n_top_(n_top) {
  if (n_top < 0 || n_top > kMaxLogprobs)
    throw std::invalid_argument("logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " +
                                std::to_string(n_top));
  top_.reserve(size_t(n_top) + 1);
}

void LogprobRow::observe(const float* logits, int n_vocab) {
  const size_t n = size_t(std::min(n_top_, n_vocab));
  float max = -INFINITY;
  top_.clear();
  if (n == 0) {
    for (int32_t i = 0; i < n_vocab; ++i) max = std::max(max, logits[i]);  // a NaN never wins: max(a, NaN) = a
  } else {
    // The n best so far, best first. Ids come in increasing order, so a logit equal to the worst kept
    // one loses the tie and never enters: almost every token costs one comparison.
    for (int32_t i = 0; i < n_vocab; ++i) {
      const float x = std::isnan(logits[i]) ? -INFINITY : logits[i];
      if (top_.size() == n && !(x > top_.back().second)) continue;
      auto at = std::find_if(top_.begin(), top_.end(), [x](const auto& t) { return t.second < x; });
      if (top_.size() == n) top_.pop_back();
      top_.insert(at, {i, x});
    }
    max = top_.front().second;
  }
  max_ = max;
  if (!std::isfinite(max)) {
    lse_ = max;
    return;
  }
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i)
    if (!std::isnan(logits[i])) sum += std::exp(logits[i] - max);  // in (0, 1]: no overflow
  lse_ = double(max) + std::log(sum);
}

float LogprobRow::logprob(float logit) const {
  if (std::isnan(logit)) return -INFINITY;
  if (!std::isfinite(max_)) return double(logit) == max_ ? 0.f : -INFINITY;
  return float(double(logit) - lse_);
}

void LogprobRow::fill(int32_t id, const float* logits, const tokenizer::Tokenizer* tok, TokenLogprobs* out) const {
  auto piece = [tok](int32_t t) { return tok ? tok->token_to_piece(t, /*remove_special=*/false) : std::string(); };
  out->id = id;
  out->piece = piece(id);
  out->logprob = logprob(logits[id]);
  out->top.resize(top_.size());
  for (size_t k = 0; k < top_.size(); ++k) {
    TokenAlternative& a = out->top[k];
    a.id = top_[k].first;
    a.piece = piece(a.id);
    a.logprob = logprob(top_[k].second);
  }
}

}  // namespace infer::engine
