// The sampler chain: turns one row of logits into the next token id.
//
// Order (as llama.cpp's default chain): penalties (repeat, frequency, presence over the last
// penalty_last_n tokens) → top-k → top-p → min-p → temperature → draw. Temperature 0 is greedy: the
// argmax after penalties, ties going to the lowest id. The result depends only on the logits, the
// token history, the parameters and the seed (no global state), so a fixed seed reproduces a run.
//
// Thread-safety: a Sampler belongs to one request; distinct Samplers may run concurrently.
// Allocation: buffers are sized once (n_vocab) at construction; sample() does not allocate.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace infer::engine {

// Throws std::invalid_argument naming the parameter and the accepted range when a value is out of
// range: temperature < 0 or not finite, top_p outside (0, 1], min_p outside [0, 1], repeat_penalty
// <= 0 or not finite, frequency/presence penalty not finite, penalty_last_n < -1.
void validate_sampling(const SamplingParams& p);

class Sampler {
 public:
  // Validates `p` (see validate_sampling). When p.seed is absent a random seed in [0, 2^63) is drawn
  // from std::random_device; seed() reports the one in use either way.
  Sampler(const SamplingParams& p, int n_vocab);

  uint64_t seed() const { return seed_; }
  const SamplingParams& params() const { return params_; }

  // Picks the next token from `logits` (n_vocab floats, not modified). `history` is every token of
  // the sequence so far (prompt and generated); penalties look at its last penalty_last_n entries
  // (-1: all of it, 0: none). A non-empty `allowed` (bit i of word i / 64 set: token i may be drawn;
  // ids past its end may not) masks the logits first, before penalties and every filter, so that a
  // constrained draw costs what an unconstrained one does; at least one allowed token is the caller's
  // to ensure.
  int32_t sample(const float* logits, std::span<const int32_t> history, std::span<const uint64_t> allowed = {});

  // The candidate list after the last sample(): (id, probability) of every token that survived the
  // filters, most probable first; probabilities sum to 1. Greedy leaves the single chosen token.
  std::span<const std::pair<int32_t, float>> last_candidates() const { return survivors_; }

 private:
  void apply_penalties(std::span<const int32_t> history);
  int32_t argmax() const;
  void select_top_k(int k);

  SamplingParams params_;
  int n_vocab_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<float> work_;                          // penalised logits, n_vocab
  std::vector<std::pair<float, int32_t>> cand_;      // (logit, id) candidates
  std::vector<std::pair<int32_t, int32_t>> counts_;  // (id, count) over the penalty window
  std::vector<std::pair<int32_t, float>> survivors_;
};

}  // namespace infer::engine
