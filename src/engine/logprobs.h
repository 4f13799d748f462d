// Per-token log-probabilities of one logits row (engine.h, TokenLogprobs): the log-softmax of the raw
// row and its most likely tokens, for the DecodeStep of a request that asked for them.
//
// Numerics: log p(i) = x_i - (m + log sum_j exp(x_j - m)) with m the row's maximum, the exponentials
// summed in double by the vectorised softmax (kernels/ops/ops.h), so the sum neither overflows nor loses
// the small terms, and x_i - lse is taken in double: a very unlikely token gets its true value, never
// -inf. NaN logits count as -inf (as in the Sampler). A row without a finite maximum gives 0 to the
// tokens at the maximum, -inf elsewhere.
//
// Cost: a copy of the row, the softmax over it and a pass for the n best; the copy is sized once, nothing
// else is allocated per row but the pieces of the entry filled in.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace infer::engine {

class LogprobRow {
 public:
  // Throws std::invalid_argument unless 0 <= n_top <= kMaxLogprobs.
  explicit LogprobRow(int n_top);

  // Reads a row of n_vocab logits: its log-sum-exp and its n_top largest logits (ties: lowest id first).
  void observe(const float* logits, int n_vocab);
  // Token `id`'s entry for the row last observed (the same `logits`): its log-probability and the
  // alternatives, with pieces from `tok` (null: empty pieces). Reuses out's buffers.
  void fill(int32_t id, const float* logits, const tokenizer::Tokenizer* tok, TokenLogprobs* out) const;

  // log p of a logit of the row last observed.
  float logprob(float logit) const;
  int n_top() const { return n_top_; }

 private:
  int n_top_;
  double max_ = 0;  // the row's maximum logit
  double lse_ = 0;  // log sum exp of the row
  std::vector<std::pair<int32_t, float>> top_;  // (id, logit), best first
  std::vector<float> probs_;  // the row, NaN as -inf, then its softmax

  void select_top(int n_vocab, size_t n);
};

}  // namespace infer::engine
