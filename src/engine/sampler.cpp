#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace infer::engine {

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("sampling: " + what); }

// Higher logit first; equal logits: lower id first (so every ordering, and greedy, is deterministic).
bool before(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

// Uniform double in [0, 1) from 53 random bits; unlike std::uniform_real_distribution its result is
// fixed by the standard engine's output alone.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

void validate_sampling(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    bad("temperature must be >= 0 (0 = greedy), got " + std::to_string(p.temperature));
  if (!(p.top_p > 0 && p.top_p <= 1)) bad("top_p must be in (0, 1], got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0 && p.min_p <= 1)) bad("min_p must be in [0, 1], got " + std::to_string(p.min_p));
  if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0)
    bad("repeat_penalty must be > 0 (1 = off), got " + std::to_string(p.repeat_penalty));
  if (!std::isfinite(p.frequency_penalty))
    bad("frequency_penalty must be finite, got " + std::to_string(p.frequency_penalty));
  if (!std::isfinite(p.presence_penalty))
    bad("presence_penalty must be finite, got " + std::to_string(p.presence_penalty));
  if (p.penalty_last_n < -1)
    bad("penalty_last_n must be >= -1 (-1 = whole sequence, 0 = off), got " + std::to_string(p.penalty_last_n));
}

Sampler::Sampler(const SamplingParams& p, int n_vocab) : params_(p), n_vocab_(n_vocab) {
  validate_sampling(p);
  if (n_vocab <= 0) bad("n_vocab must be > 0");
  if (p.seed) {
    seed_ = *p.seed;
  } else {
    // 63 bits: hosts report and accept seeds as signed 64-bit integers, so a drawn seed must replay.
    std::random_device rd;
    seed_ = ((uint64_t(rd()) << 32) ^ rd()) & uint64_t(INT64_MAX);
  }
  params_.seed = seed_;
  rng_.seed(seed_);
  work_.resize(n_vocab);
  cand_.reserve(n_vocab);
  survivors_.reserve(n_vocab);
}

void Sampler::apply_penalties(std::span<const int32_t> history) {
  const auto& p = params_;
  if (p.penalty_last_n == 0 || (p.repeat_penalty == 1.f && p.frequency_penalty == 0.f && p.presence_penalty == 0.f))
    return;
  size_t n = p.penalty_last_n < 0 ? history.size() : std::min(history.size(), size_t(p.penalty_last_n));
  auto window = history.subspan(history.size() - n);
  counts_.clear();
  for (int32_t id : window)
    if (id >= 0 && id < n_vocab_) counts_.emplace_back(id, 1);
  std::sort(counts_.begin(), counts_.end());
  // Merge equal ids into one (id, count) entry; each distinct token is penalised once.
  size_t out = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (out > 0 && counts_[out - 1].first == counts_[i].first) {
      counts_[out - 1].second++;
    } else {
      counts_[out++] = counts_[i];
    }
  }
  counts_.resize(out);
  for (auto [id, count] : counts_) {
    float& l = work_[id];
    // Dividing a positive logit and multiplying a negative one both make the token less likely.
    l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= float(count) * p.frequency_penalty + p.presence_penalty;
  }
}

int32_t Sampler::argmax() const {
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab_; ++i)
    if (work_[i] > work_[best]) best = i;  // strict: ties keep the lowest id
  return best;
}

// The k best (logit, id) pairs in `before` order, in one pass: a heap of the k best so far, its worst
// on top, so almost every token costs one comparison (nth_element over the whole vocabulary ran on the
// scheduler thread while the compute pool waited: infer serve-bench; docs/performance.md, Constants).
// The set is the same one nth_element gives: `before` is a strict total order.
void Sampler::select_top_k(int k) {
  cand_.clear();
  for (int32_t i = 0; i < k; ++i) cand_.emplace_back(work_[i], i);
  std::make_heap(cand_.begin(), cand_.end(), before);
  // Ids come in increasing order, so a token whose logit is not above the worst kept one never enters
  // (it would lose the tie on id). Blocks with none above are skipped after a count the compiler
  // vectorises: after the first few hundred tokens almost every block.
  constexpr int32_t kBlock = 64;
  for (int32_t i = k; i < n_vocab_;) {
    const int32_t end = std::min(n_vocab_, i + kBlock);
    const float worst = cand_.front().first;
    int above = 0;
    for (int32_t j = i; j < end; ++j) above += work_[j] > worst;
    if (above == 0) {
      i = end;
      continue;
    }
    for (; i < end; ++i) {
      if (!(work_[i] > cand_.front().first)) continue;
      std::pop_heap(cand_.begin(), cand_.end(), before);
      cand_.back() = {work_[i], i};
      std::push_heap(cand_.begin(), cand_.end(), before);
    }
  }
}

int32_t Sampler::sample(const float* logits, std::span<const int32_t> history, std::span<const uint64_t> allowed) {
  const auto& p = params_;
  if (allowed.empty()) {
    for (int i = 0; i < n_vocab_; ++i) work_[i] = std::isnan(logits[i]) ? -INFINITY : logits[i];
  } else {
    // A word at a time: in most words of a constrained row every token is allowed or none is.
    for (int w = 0; w * 64 < n_vocab_; ++w) {
      const int begin = w * 64, end = std::min(n_vocab_, begin + 64);
      const uint64_t bits = size_t(w) < allowed.size() ? allowed[size_t(w)] : 0;
      if (bits == 0) {
        std::fill(work_.begin() + begin, work_.begin() + end, -INFINITY);
      } else if (bits == ~uint64_t(0)) {
        for (int i = begin; i < end; ++i) work_[i] = std::isnan(logits[i]) ? -INFINITY : logits[i];
      } else {
        for (int i = begin; i < end; ++i)
          work_[i] = ((bits >> (i - begin)) & 1) && !std::isnan(logits[i]) ? logits[i] : -INFINITY;
      }
    }
  }
  apply_penalties(history);
  survivors_.clear();

  if (p.temperature == 0.f) {
    int32_t id = argmax();
    survivors_.emplace_back(id, 1.f);
    return id;
  }

  if (p.top_k > 0 && p.top_k < n_vocab_) {
    select_top_k(p.top_k);
  } else {
    cand_.clear();
    for (int32_t i = 0; i < n_vocab_; ++i) cand_.emplace_back(work_[i], i);
  }
  // `before` orders best first, so the best candidate is its minimum.
  const float max_logit = std::min_element(cand_.begin(), cand_.end(), before)->first;
  if (!std::isfinite(max_logit)) {
    // Everything was penalised or masked away: fall back to the first best token.
    int32_t id = std::min_element(cand_.begin(), cand_.end(), before)->second;
    survivors_.emplace_back(id, 1.f);
    return id;
  }
  // min-p keeps tokens with prob >= min_p * max prob, i.e. logit >= max + log(min_p). Without top-p
  // it commutes with sorting, so prune first: sorting 150k candidates per token is the slow part.
  const bool min_p_on = p.min_p > 0.f;
  const float min_logit = min_p_on ? max_logit + std::log(p.min_p) : -INFINITY;
  if (min_p_on && p.top_p >= 1.f)
    std::erase_if(cand_, [&](const auto& c) { return c.first < min_logit; });
  std::sort(cand_.begin(), cand_.end(), before);

  // Softmax of the untempered logits for the top-p cut (as llama.cpp: temperature comes last).
  if (p.top_p < 1.f) {
    double sum = 0;
    for (auto& c : cand_) sum += std::exp(double(c.first) - max_logit);
    double cum = 0;
    size_t keep = cand_.size();
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += std::exp(double(cand_[i].first) - max_logit) / sum;
      if (cum >= p.top_p) { keep = i + 1; break; }
    }
    cand_.resize(keep);
  }
  if (min_p_on) {
    size_t keep = 1;
    while (keep < cand_.size() && cand_[keep].first >= min_logit) ++keep;
    cand_.resize(keep);
  }

  // Temperature, softmax, draw.
  double sum = 0;
  for (auto& c : cand_) sum += std::exp((double(c.first) - max_logit) / p.temperature);
  for (auto& c : cand_)
    survivors_.emplace_back(c.second, float(std::exp((double(c.first) - max_logit) / p.temperature) / sum));
  const double r = uniform01(rng_);
  double cum = 0;
  for (auto& s : survivors_) {
    cum += s.second;
    if (r < cum) return s.first;
  }
  return survivors_.back().first;  // rounding left r just above the total
}

}  // namespace infer::engine
