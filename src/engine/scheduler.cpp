#include "engine/scheduler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <span>
#include <stdexcept>

#include "engine/decode_step.h"

namespace infer::engine {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct Scheduler::Sequence {
  explicit Sequence(std::unique_ptr<PendingRequest> req) : p(std::move(req)) {}

  std::unique_ptr<PendingRequest> p;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int n_prompt = 0;
  int n_past = 0;               // tokens whose K/V are in the pool
  int n_cached = 0;             // of those, reused from the prefix cache
  std::vector<int32_t> pages;   // page table, all pages the sequence can ever need
  RadixTree::Node* lock = nullptr;
  std::optional<DecodeStep> decode;  // absent for embeddings
  std::vector<double> pooled;   // embeddings: sum of the pooled hidden states, added in position order
                                // (Pooling::None: each position's state, n_prompt rows)
  int n_pooled = 0;             // how many states `pooled` holds
  std::string piece;            // text released while handling the current token
  Result result;
  Clock::time_point admitted, first_token;
  bool has_first_token = false;
  bool finished = false;

  bool decoding() const { return n_past >= n_prompt; }
};

Scheduler::Scheduler(const model::Model& model, const tokenizer::Tokenizer& tok, kernels::ThreadPool& pool,
                     model::Backend& backend, const EngineOptions& opts)
    : model_(model),
      tok_(tok),
      pool_(pool),
      backend_(backend),
      opts_(opts),
      n_vocab_(model.hparams().n_vocab),
      n_embd_(model.hparams().n_embd),
      page_tokens_(backend.page_tokens()),
      pages_(backend.n_pages()),
      tree_(pages_, backend.page_tokens()),
      window_start_(Clock::now()),
      queue_(size_t(opts.queue_depth)) {
  // Decode rows are always scheduled; prefill gets at least one row, so a step has at most
  // step_tokens + max_running rows.
  if (backend.max_rows() < opts.step_tokens + opts.max_running)
    throw std::invalid_argument("scheduler: the backend takes " + std::to_string(backend.max_rows()) +
                                " rows a pass, a step can have " + std::to_string(opts.step_tokens + opts.max_running));
  logits_.resize(size_t(opts.max_running) * size_t(n_vocab_));
  // Every row of a step can want its hidden state (mean-pooled embeddings).
  hidden_.resize(size_t(backend.max_rows()) * size_t(n_embd_));
  stats_.kv_pages_total = backend.n_pages();
  stats_.kv_bytes = backend.kv_bytes();
  stats_.device = backend.kind();
  stats_.model_bytes = model.weight_bytes();
  stats_.kv_bytes_per_token = model::KvPool::bytes_per_token(model.hparams(), backend.kv_type());
  stats_.kv_type = backend.kv_type();
  stats_.interleaved_matrices = model.interleaved_matrices();
  stats_.kv_page_tokens = backend.page_tokens();
  stats_.max_seq_tokens = opts.context;
  thread_ = std::thread([this, nice = opts.nice] {
    if (nice != 0) kernels::set_thread_nice(nice);  // this thread is also the compute pool's worker 0
    loop();
  });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::optional<SubmitError> Scheduler::submit(std::unique_ptr<PendingRequest>& p) {
  {
    std::lock_guard lk(mu_);
    if (stop_) return SubmitError{SubmitError::Kind::Busy, "engine is shutting down", 0};
    const int priority = p->req.priority;
    if (!queue_.try_push(p, priority)) {
      rejected_busy_.fetch_add(1, std::memory_order_relaxed);
      return SubmitError{SubmitError::Kind::Busy,
                         "queue full (" + std::to_string(opts_.queue_depth) + " waiting)", retry_after_ms()};
    }
  }
  wake_.notify_one();
  return std::nullopt;
}

int Scheduler::retry_after_ms() const {
  // A queue slot frees when a running request finishes: about one service time per running slot.
  double ema = service_ms_ema_.load(std::memory_order_relaxed);
  if (ema <= 0) return 100;
  return int(std::clamp(ema / opts_.max_running, 10.0, 30000.0));
}

void Scheduler::request_flush() {
  flush_requested_.store(true);
  wake_.notify_one();
}

EngineStats Scheduler::stats() const {
  EngineStats s;
  {
    std::lock_guard lk(stats_mu_);
    s = stats_;
    // "Recent" throughput: nothing generated for two seconds means idle.
    if (Clock::now() - last_token_time_ > std::chrono::seconds(2)) s.decode_tps = 0;
  }
  s.queued = int(queue_.size());
  s.rejected_busy = rejected_busy_.load(std::memory_order_relaxed);
  return s;
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock lk(mu_);
      // The timeout only bounds how late a stray wake-up can be; real work always notifies.
      wake_.wait_for(lk, std::chrono::milliseconds(50), [&] {
        return stop_ || !running_.empty() || queue_.size() > 0 || flush_requested_.load();
      });
      if (stop_) break;
    }
    step();
  }
  // Shutdown: no submit can get in any more (stop_ is set under mu_).
  for (auto& s : running_) finish(*s, FinishReason::Cancelled);
  running_.clear();
  std::vector<std::unique_ptr<PendingRequest>> left;
  queue_.remove_if([](const auto&) { return true; }, left);
  for (auto& p : left) finish_queued(p, FinishReason::Cancelled);
  tree_.flush();
  publish_stats();
}

void Scheduler::step() {
  if (flush_requested_.exchange(false)) tree_.flush();
  expire_queued();
  expire_running();
  admit();
  if (build_batch()) {
    const bool decode_step = decode_only_;
    const Clock::time_point start = decode_step ? Clock::now() : Clock::time_point{};
    model::PassProfile pass;
    bool ok = true;
    try {
      backend_.run(batch_, logits_.data(), hidden_.data(), decode_step && opts_.profile ? &pass : nullptr);
    } catch (const std::exception& e) {
      fail_batch(std::string("forward pass failed: ") + e.what());
      ok = false;
    }
    // The step and its pass are counted before the callbacks run, so that stats() read from a
    // request's on_done include its last step; the time after the pass is added when the step ends
    // (to the wall time too, which so always holds the phases counted).
    DecodeProfile& profile = local_.decode_profile;
    const Clock::time_point outputs_start = decode_step ? Clock::now() : Clock::time_point{};
    if (decode_step && ok) {
      ++profile.steps;
      profile.rows += batch_.rows.size();
      profile.forward.accumulate(pass);
      profile.wall_s += std::chrono::duration<double>(outputs_start - start).count();
    }
    if (ok) process_outputs();
    if (decode_step && ok) {
      const double after_pass_s = std::chrono::duration<double>(Clock::now() - outputs_start).count();
      if (opts_.profile) profile.after_pass_s += after_pass_s;
      profile.wall_s += after_pass_s;
    }
  }
  std::erase_if(running_, [](const auto& s) { return s->finished; });
  publish_stats();
}

void Scheduler::expire_queued() {
  const auto now = Clock::now();
  std::vector<std::unique_ptr<PendingRequest>> out;
  queue_.remove_if(
      [&](const std::unique_ptr<PendingRequest>& p) { return p->handle->cancelled.load() || p->req.deadline <= now; },
      out);
  for (auto& p : out)
    finish_queued(p, p->handle->cancelled.load() ? FinishReason::Cancelled : FinishReason::Deadline);
}

void Scheduler::expire_running() {
  const auto now = Clock::now();
  for (auto& s : running_) {
    if (s->p->handle->cancelled.load())
      finish(*s, FinishReason::Cancelled);
    else if (s->p->req.deadline <= now)
      finish(*s, FinishReason::Deadline);
  }
  std::erase_if(running_, [](const auto& s) { return s->finished; });
}

// Only a causal model's prefix is reusable (a whole-sequence model's keys depend on later tokens), and
// only by a request that needs the last position alone.
bool Scheduler::uses_prefix_cache(const Request& req) const {
  return opts_.prefix_cache && model_.hparams().causal && !(req.embedding && req.pooling != Pooling::Last);
}

std::optional<Scheduler::Reservation> Scheduler::reserve(const PendingRequest& p) {
  Reservation r;
  const auto& prompt = p.req.prompt_ids;
  if (uses_prefix_cache(p.req)) {
    // Keep at least the last prompt token to compute: its logits start generation.
    r.match = tree_.match(prompt, (int(prompt.size()) - 1) / page_tokens_);
  }
  const int need = p.pages_needed - int(r.match.pages.size());
  if (pages_.n_free() + tree_.evictable_pages() < need) {
    tree_.unlock(r.match.node);
    pages_.release_all(r.match.pages);
    return std::nullopt;
  }
  if (pages_.n_free() < need) tree_.evict(need - pages_.n_free());
  r.pages = std::move(r.match.pages);
  if (!pages_.allocate(need, r.pages)) {  // cannot happen: evictable pages are held by the tree alone
    tree_.unlock(r.match.node);
    pages_.release_all(r.pages);
    return std::nullopt;
  }
  return r;
}

void Scheduler::admit() {
  std::vector<Reservation> reserved;
  std::vector<std::unique_ptr<PendingRequest>> admitted;
  queue_.admit_front(
      [&](std::unique_ptr<PendingRequest>& p) {
        if (running_.size() + reserved.size() >= size_t(opts_.max_running)) return false;
        auto r = reserve(*p);
        if (!r) return false;
        reserved.push_back(std::move(*r));
        return true;
      },
      admitted);
  const auto now = Clock::now();
  for (size_t i = 0; i < admitted.size(); ++i) {
    auto s = std::make_unique<Sequence>(std::move(admitted[i]));
    Reservation& r = reserved[i];
    const Request& req = s->p->req;
    s->tokens.reserve(size_t(s->p->max_len));
    s->tokens = req.prompt_ids;
    s->n_prompt = int(req.prompt_ids.size());
    s->n_past = s->n_cached = r.match.n_tokens();
    s->pages = std::move(r.pages);
    s->lock = r.match.node;
    if (req.embedding)
      s->pooled.assign(size_t(n_embd_) * size_t(req.pooling == Pooling::None ? s->n_prompt : 1), 0.0);
    else
      s->decode.emplace(req.sampling, n_vocab_, &tok_, req.stop, true,
                        [seq = s.get()](const std::string& text) { seq->piece += text; }, req.grammar);
    if (!req.embedding && req.logprobs >= 0) {
      s->decode->enable_logprobs(req.logprobs);  // the range was checked by submit
      s->result.logprobs.reserve(size_t(s->p->max_len - s->n_prompt));
    }
    s->admitted = now;
    local_.prompt_tokens += uint64_t(s->n_prompt);
    local_.cached_tokens += uint64_t(s->n_cached);
    if (uses_prefix_cache(req)) {
      ++local_.cache_lookups;
      if (s->n_cached > 0) ++local_.cache_hits;
    }
    running_.push_back(std::move(s));
  }
}

bool Scheduler::build_batch() {
  batch_.rows.clear();
  batch_.seqs.clear();
  batch_seqs_.clear();
  batch_rows_.clear();
  logit_seqs_.clear();
  hidden_rows_.clear();
  auto add_seq = [&](Sequence& s, int n_rows) {
    batch_.seqs.push_back(model::SeqPages{s.pages.data(), int(s.pages.size())});
    batch_seqs_.push_back(&s);
    batch_rows_.push_back(n_rows);
    return int(batch_.seqs.size()) - 1;
  };
  int n_decode = 0;
  for (auto& s : running_) {
    if (!s->decoding()) continue;
    const int idx = add_seq(*s, 1);
    batch_.rows.push_back(model::BatchRow{idx, s->n_past, s->tokens.back(), true});
    logit_seqs_.push_back(s.get());
    ++n_decode;
  }
  decode_only_ = true;
  int budget = std::max(opts_.step_tokens - n_decode, 1);
  for (auto& s : running_) {
    if (s->decoding() || budget == 0) continue;
    const int chunk = std::min(s->n_prompt - s->n_past, budget);
    if (!model_.hparams().causal && chunk < s->n_prompt - s->n_past) continue;  // whole prompt or nothing
    const int idx = add_seq(*s, chunk);
    const Request& req = s->p->req;
    for (int pos = s->n_past; pos < s->n_past + chunk; ++pos) {
      const bool last = pos == s->n_prompt - 1;
      if (!req.embedding) {
        batch_.rows.push_back(model::BatchRow{idx, pos, s->tokens[size_t(pos)], last});
        if (last) logit_seqs_.push_back(s.get());
        continue;
      }
      // Embeddings need hidden states only, never logits.
      const bool pooled = req.pooling == Pooling::Last  ? last
                          : req.pooling == Pooling::Cls ? pos == 0
                                                        : true;  // Mean, None
      batch_.rows.push_back(model::BatchRow{idx, pos, s->tokens[size_t(pos)], false, pooled});
      if (pooled) hidden_rows_.emplace_back(s.get(), pos);
    }
    budget -= chunk;
    decode_only_ = false;
  }
  return !batch_.rows.empty();
}

void Scheduler::process_outputs() {
  for (size_t i = 0; i < batch_seqs_.size(); ++i) batch_seqs_[i]->n_past += batch_rows_[i];
  sample_all();
  // Hidden-only rows follow the logits rows in hidden_, in row order: each sequence's in position
  // order, so a mean is summed in the same order however the prompt was chunked.
  const float* hidden_only = &hidden_[logit_seqs_.size() * size_t(n_embd_)];
  for (size_t k = 0; k < hidden_rows_.size(); ++k) {
    auto [s, pos] = hidden_rows_[k];
    const float* h = hidden_only + k * size_t(n_embd_);
    double* into = &s->pooled[s->p->req.pooling == Pooling::None ? size_t(pos) * size_t(n_embd_) : 0];
    for (int i = 0; i < n_embd_; ++i) into[i] += h[i];
    ++s->n_pooled;
  }
  for (Sequence* s : batch_seqs_)
    if (s->p->req.embedding && !s->finished && s->n_past == s->n_prompt) finish_embedding(*s);
}

void Scheduler::finish_embedding(Sequence& s) {
  std::vector<float>& e = s.result.embedding;
  const bool rows = s.p->req.pooling == Pooling::None;  // every position's state, not their mean
  e.resize(s.pooled.size());
  for (size_t i = 0; i < e.size(); ++i) e[i] = float(rows ? s.pooled[i] : s.pooled[i] / s.n_pooled);
  if (s.p->req.normalize) {
    for (size_t at = 0; at < e.size(); at += size_t(n_embd_)) {
      double norm = 0;
      for (int i = 0; i < n_embd_; ++i) norm += double(e[at + size_t(i)]) * e[at + size_t(i)];
      const float inv = norm > 0 ? float(1.0 / std::sqrt(norm)) : 0.f;
      for (int i = 0; i < n_embd_; ++i) e[at + size_t(i)] *= inv;
    }
  }
  s.first_token = Clock::now();
  s.has_first_token = true;
  finish(s, FinishReason::Stop);
}

// Callbacks and bookkeeping run here in row order; the draws themselves (each sequence's own sampler
// and seed, so their order does not matter) run on the compute pool: sampling a large vocabulary for
// 8 sequences on this thread alone left the other threads waiting (infer serve-bench --profile;
// docs/performance.md, Constants).
void Scheduler::sample_all() {
  const size_t n = logit_seqs_.size();
  draws_.assign(n, Draw{});
  std::vector<size_t>& todo = to_draw_;
  todo.clear();
  for (size_t k = 0; k < n; ++k) {
    Sequence& s = *logit_seqs_[k];
    if (s.finished) continue;
    const int step = int(s.tokens.size()) - s.n_prompt;
    if (step == 0) {
      s.first_token = Clock::now();
      s.has_first_token = true;
    }
    try {
      if (s.p->cb.on_logits) s.p->cb.on_logits(step, &logits_[k * size_t(n_vocab_)], n_vocab_);
      todo.push_back(k);
    } catch (const std::exception& e) {
      finish(s, FinishReason::Error, std::string("sampling or callback failed: ") + e.what());
    }
  }
  auto draw = [&](size_t k) {
    try {
      draws_[k].id = logit_seqs_[k]->decode->sample(&logits_[k * size_t(n_vocab_)], logit_seqs_[k]->tokens);
    } catch (const std::exception& e) {
      draws_[k].error = e.what();
    }
  };
  if (todo.size() <= 1 || pool_.size() <= 1) {
    for (size_t k : todo) draw(k);
  } else {
    std::atomic<size_t> next{0};
    pool_.run([&](int) {
      for (size_t i = next.fetch_add(1); i < todo.size(); i = next.fetch_add(1)) draw(todo[i]);
    });
  }
  for (size_t k : todo) take_draw(*logit_seqs_[k], draws_[k]);
}

void Scheduler::take_draw(Sequence& s, const Draw& d) {
  if (!d.error.empty()) {
    finish(s, FinishReason::Error, "sampling or callback failed: " + d.error);
    return;
  }
  try {
    const int32_t id = d.id;
    s.piece.clear();
    const DecodeStep::Outcome outcome = s.decode->take(id);
    if (outcome == DecodeStep::Outcome::EndOfGeneration) {  // not in Result::ids
      finish(s, FinishReason::Stop);
      return;
    }
    s.tokens.push_back(id);
    s.result.ids.push_back(id);
    const TokenLogprobs* logprobs = nullptr;
    if (TokenLogprobs* e = s.decode->logprobs()) {
      s.result.logprobs.push_back(std::move(*e));
      logprobs = &s.result.logprobs.back();
    }
    ++local_.tokens_generated;
    ++window_tokens_;
    if (s.p->cb.on_token) s.p->cb.on_token(id, s.piece, logprobs);
    if (outcome == DecodeStep::Outcome::StopString || outcome == DecodeStep::Outcome::GrammarComplete)
      finish(s, FinishReason::Stop);
    else if (int(s.tokens.size()) >= s.p->max_len)
      finish(s, FinishReason::Length);
  } catch (const std::exception& e) {
    finish(s, FinishReason::Error, std::string("sampling or callback failed: ") + e.what());
  }
}

void Scheduler::finish(Sequence& s, FinishReason why, std::string error) {
  if (s.finished) return;
  s.finished = true;
  const auto now = Clock::now();
  s.piece.clear();
  if (s.decode && why != FinishReason::Error) s.decode->finish();

  // Give the computed prefix to the cache (whole pages), then let go of our pages.
  if (opts_.prefix_cache && model_.hparams().causal && why != FinishReason::Error) {
    const int n_full = s.n_past / page_tokens_;
    tree_.insert(std::span<const int32_t>(s.tokens.data(), size_t(n_full) * size_t(page_tokens_)),
                 std::span<const int32_t>(s.pages.data(), size_t(n_full)));
  }
  tree_.unlock(s.lock);
  s.lock = nullptr;
  pages_.release_all(s.pages);

  Result& r = s.result;
  r.finish = why;
  r.error = std::move(error);
  if (s.decode) r.text = s.decode->text();
  r.seed = s.decode ? s.decode->seed() : s.p->req.sampling.seed.value_or(0);
  Timings& t = r.timings;
  t.queue_ms = ms_between(s.p->submitted, s.admitted);
  t.prompt_tokens = s.n_prompt;
  t.cached_tokens = s.n_cached;
  t.generated_tokens = int(r.ids.size());
  if (s.has_first_token) {
    t.ttft_ms = ms_between(s.p->submitted, s.first_token);
    const double prefill_ms = ms_between(s.admitted, s.first_token);
    if (prefill_ms > 0) t.prefill_tps = (s.n_prompt - s.n_cached) * 1000.0 / prefill_ms;
    const double decode_ms = ms_between(s.first_token, now);
    if (decode_ms > 0 && t.generated_tokens > 1) t.decode_tps = (t.generated_tokens - 1) * 1000.0 / decode_ms;
  }
  if ((why == FinishReason::Stop || why == FinishReason::Length) && s.has_first_token) {
    const double tpot = t.generated_tokens > 1 ? ms_between(s.first_token, now) / (t.generated_tokens - 1) : -1;
    std::lock_guard lk(stats_mu_);
    latency_.add(t.queue_ms, t.ttft_ms, tpot, ms_between(s.p->submitted, now));
  }
  switch (why) {
    case FinishReason::Stop:
    case FinishReason::Length: ++local_.completed; break;
    case FinishReason::Cancelled: ++local_.cancelled; break;
    case FinishReason::Deadline: ++local_.timeouts; break;
    case FinishReason::Error: ++local_.errors; break;
  }
  const double service = ms_between(s.admitted, now);
  const double ema = service_ms_ema_.load(std::memory_order_relaxed);
  service_ms_ema_.store(ema <= 0 ? service : 0.8 * ema + 0.2 * service, std::memory_order_relaxed);

  publish_stats();  // so that stats() seen from on_done already count this request
  if (s.p->cb.on_done) {
    try {
      s.p->cb.on_done(std::move(r));
    } catch (...) {
      // A throwing callback must not take the engine thread down; the request is over either way.
    }
  }
}

void Scheduler::finish_queued(std::unique_ptr<PendingRequest>& p, FinishReason why) {
  Result r;
  r.finish = why;
  r.seed = p->req.sampling.seed.value_or(0);
  r.timings.queue_ms = ms_between(p->submitted, Clock::now());
  r.timings.prompt_tokens = int(p->req.prompt_ids.size());
  if (why == FinishReason::Cancelled) ++local_.cancelled;
  if (why == FinishReason::Deadline) ++local_.timeouts;
  publish_stats();
  if (p->cb.on_done) {
    try {
      p->cb.on_done(std::move(r));
    } catch (...) {
    }
  }
}

void Scheduler::fail_batch(const std::string& error) {
  // The K/V the pass wrote is unknown: finish (without caching) every sequence that had rows in it.
  for (Sequence* s : batch_seqs_) finish(*s, FinishReason::Error, error);
}

LatencySummary Scheduler::latency() const {
  LatencyWindow copy;
  {
    std::lock_guard lk(stats_mu_);
    copy = latency_;
  }
  return copy.summary();
}

void Scheduler::publish_stats() {
  const auto now = Clock::now();
  std::lock_guard lk(stats_mu_);
  const double window_s = std::chrono::duration<double>(now - window_start_).count();
  if (local_.tokens_generated != stats_.tokens_generated) last_token_time_ = now;
  if (window_s >= 1.0) {
    stats_.decode_tps = window_tokens_ / window_s;
    window_tokens_ = 0;
    window_start_ = now;
  }
  const EngineStats keep = stats_;
  stats_ = local_;
  stats_.decode_tps = keep.decode_tps;
  stats_.running = int(std::count_if(running_.begin(), running_.end(), [](const auto& s) { return !s->finished; }));
  stats_.kv_pages_total = pages_.n_total();
  stats_.kv_pages_used = pages_.n_used();
  stats_.kv_pages_cached = tree_.evictable_pages();  // held by the cache alone: used - cached is the requests'
  stats_.cache_evictions = tree_.evicted_pages();
  stats_.kv_bytes = keep.kv_bytes;
  stats_.model_bytes = keep.model_bytes;
  stats_.kv_bytes_per_token = keep.kv_bytes_per_token;
  stats_.kv_type = keep.kv_type;
  stats_.interleaved_matrices = keep.interleaved_matrices;
  stats_.kv_page_tokens = keep.kv_page_tokens;
  stats_.max_seq_tokens = keep.max_seq_tokens;
  stats_.device = keep.device;
}

}  // namespace infer::engine
