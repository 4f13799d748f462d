#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/ops/ops.h"

namespace infer::engine {

namespace {

// Copies the row with NaN as -inf and returns its maximum. Eight running maxima, so that the compiler
// vectorises the loop (one running maximum is a chain it must keep in order).
float clean_copy(const float* in, int n, float* out) {
  constexpr int kLanes = 8;
  float lane_max[kLanes];
  std::fill_n(lane_max, kLanes, -INFINITY);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      const float x = in[i + k] == in[i + k] ? in[i + k] : -INFINITY;
      out[i + k] = x;
      lane_max[k] = x > lane_max[k] ? x : lane_max[k];
    }
  float max = -INFINITY;
  for (float m : lane_max) max = m > max ? m : max;
  for (; i < n; ++i) {
    const float x = in[i] == in[i] ? in[i] : -INFINITY;
    out[i] = x;
    max = x > max ? x : max;
  }
  return max;
}

}  // namespace

LogprobRow::LogprobRow(int n_top) : n_top_(n_top) {
  if (n_top < 0 || n_top > kMaxLogprobs)
    throw std::invalid_argument("logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " +
                                std::to_string(n_top));
  top_.reserve(size_t(n_top) + 1);
}

void LogprobRow::observe(const float* logits, int n_vocab) {
  const size_t n = size_t(std::min(n_top_, n_vocab));
  if (probs_.size() < size_t(n_vocab)) probs_.resize(size_t(n_vocab));  // once per request
  const float max = clean_copy(logits, n_vocab, probs_.data());
  max_ = max;
  top_.clear();
  if (n > 0) select_top(n_vocab, n);
  if (!std::isfinite(max)) {
    lse_ = max;
    return;
  }
  // The vectorised softmax (subtract the max, exp, sum in double) gives the sum too: the maximum's
  // probability is e^0 / sum, so log sum exp = max - log p(max), to a few float ulps of p(max).
  const float at_max = max;
  const size_t argmax = size_t(std::find(probs_.begin(), probs_.begin() + n_vocab, at_max) - probs_.begin());
  kernels::softmax(probs_.data(), n_vocab);
  lse_ = double(max) - std::log(double(probs_[argmax]));
}

// The n best (id, logit) of probs_ (the cleaned row) into top_, best first, ties lowest id first: a
// sorted list of the best so far. Ids come in increasing order, so a logit not above the worst kept one
// never enters (it would lose the tie on id); blocks with none above it are skipped after a count the
// compiler vectorises, which after the first few hundred tokens is almost every block.
void LogprobRow::select_top(int n_vocab, size_t n) {
  auto insert = [&](int32_t i) {
    const float x = probs_[size_t(i)];
    auto at = std::find_if(top_.begin(), top_.end(), [x](const auto& t) { return t.second < x; });
    if (top_.size() == n) top_.pop_back();
    top_.insert(at, {i, x});
  };
  int32_t i = 0;
  for (; i < n_vocab && top_.size() < n; ++i) insert(i);
  constexpr int32_t kBlock = 64;
  while (i < n_vocab) {
    const int32_t end = std::min(n_vocab, i + kBlock);
    const float worst = top_.back().second;
    int above = 0;
    for (int32_t j = i; j < end; ++j) above += probs_[size_t(j)] > worst;
    if (above == 0) {
      i = end;
      continue;
    }
    for (; i < end; ++i)
      if (probs_[size_t(i)] > top_.back().second) insert(i);
  }
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
