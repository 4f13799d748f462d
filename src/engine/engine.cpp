// Engine::create (load, plan memory, start the scheduler) and submit (tokenise, validate, queue).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace infer::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Deadline: return "deadline";
    case FinishReason::Error: return "error";
  }
  return "unknown";
}

void Handle::cancel() const {
  if (state_) state_->cancelled.store(true);
}

uint64_t Handle::id() const { return state_ ? state_->id : 0; }

namespace {

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

void check_options(const EngineOptions& o) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("engine options: " + what); };
  if (o.threads < 0) bad("threads must be >= 0");
  if (o.max_running < 1) bad("max_running must be >= 1");
  if (o.queue_depth < 1) bad("queue_depth must be >= 1");
  if (o.context < 2) bad("context must be >= 2");
  if (o.kv_tokens < 0) bad("kv_tokens must be >= 0");
  if (o.page_tokens < 1) bad("page_tokens must be >= 1");
  if (o.step_tokens < 1) bad("step_tokens must be >= 1");
  if (o.nice < 0 || o.nice > 19) bad("nice must be in 0..19");
}

class EngineImpl final : public Engine {
 public:
  explicit EngineImpl(const EngineOptions& opts) : opts_(opts) {
    check_options(opts_);
    model::LoadOptions lo;
    lo.mmap = opts_.mmap;
    model_ = model::Model::load(opts_.model_path, lo);
    tok_ = tokenizer::Tokenizer::from_gguf(model_->file());
    const model::HParams& hp = model_->hparams();

    // Resolve the plan: threads, per-sequence cap, pool size in whole pages.
    if (opts_.threads == 0) opts_.threads = int(std::max(1u, std::thread::hardware_concurrency()));
    if (hp.n_ctx_train > 0) opts_.context = std::min(opts_.context, hp.n_ctx_train);
    // By default max_running sequences of the full context fit at once: each rounded up to whole pages.
    const int64_t context_pages = (int64_t(opts_.context) + opts_.page_tokens - 1) / opts_.page_tokens;
    int64_t kv_tokens = int64_t(opts_.max_running) * context_pages * opts_.page_tokens;
    if (opts_.kv_tokens > 0)
      kv_tokens = opts_.kv_tokens;
    else if (opts_.kv_bytes > 0)  // whole pages within the budget (a page is its tokens plus a small pad)
      kv_tokens = int64_t(std::min<uint64_t>(opts_.kv_bytes / model::KvPool::bytes_for(hp, opts_.page_tokens, 1),
                                             INT32_MAX / opts_.page_tokens)) * opts_.page_tokens;
    if (kv_tokens < opts_.page_tokens)
      throw std::invalid_argument("engine options: the KV pool holds less than one page (" + std::to_string(kv_tokens) +
                                  " tokens at " + std::to_string(hp.kv_bytes_per_token()) + " bytes/token)");
    const int64_t n_pages = (kv_tokens + opts_.page_tokens - 1) / opts_.page_tokens;
    if (n_pages > INT32_MAX / opts_.page_tokens)
      throw std::runtime_error("engine: KV pool of " + std::to_string(kv_tokens) + " tokens is too large");
    opts_.kv_tokens = int(n_pages * opts_.page_tokens);
    const uint64_t kv_bytes = model::KvPool::bytes_for(hp, opts_.page_tokens, int(n_pages));
    try {
      kv_ = std::make_unique<model::KvPool>(hp, opts_.page_tokens, int(n_pages));
    } catch (const std::exception& e) {
      throw std::runtime_error("engine: cannot allocate the KV pool (" + std::to_string(n_pages) + " pages of " +
                               std::to_string(opts_.page_tokens) + " tokens, " + mib(kv_bytes) + " at " +
                               std::to_string(hp.kv_bytes_per_token()) + " bytes/token): " + e.what());
    }
    pool_ = std::make_unique<kernels::ThreadPool>(opts_.threads, opts_.nice);
    scheduler_ = std::make_unique<Scheduler>(*model_, *tok_, *pool_, *kv_, opts_);
  }

  ~EngineImpl() override { scheduler_.reset(); }  // before the pool, pages and model it uses

  std::variant<Handle, SubmitError> submit(Request req, Callbacks cb) override {
    auto invalid = [](std::string m) { return SubmitError{SubmitError::Kind::Invalid, std::move(m), 0}; };
    if (req.prompt_ids.empty()) {
      if (req.prompt_text.empty()) return invalid("empty prompt");
      try {
        req.prompt_ids = tok_->encode(req.prompt_text);
      } catch (const std::exception& e) {
        return invalid(std::string("cannot tokenise the prompt: ") + e.what());
      }
      if (req.prompt_ids.empty()) return invalid("the prompt has no tokens");
    }
    const int n_vocab = model_->hparams().n_vocab;
    for (size_t i = 0; i < req.prompt_ids.size(); ++i)
      if (req.prompt_ids[i] < 0 || req.prompt_ids[i] >= n_vocab)
        return invalid("prompt token " + std::to_string(i) + " = " + std::to_string(req.prompt_ids[i]) +
                       " is not in the vocabulary [0, " + std::to_string(n_vocab) + ")");
    const int64_t n_prompt = int64_t(req.prompt_ids.size());
    if (!req.embedding && req.max_tokens < 1) return invalid("max_tokens must be >= 1");
    if (!req.embedding) {
      try {
        validate_sampling(req.sampling);
      } catch (const std::exception& e) {
        return invalid(e.what());
      }
    }
    if (req.embedding && req.pooling == Pooling::Default)
      req.pooling = model_->hparams().pooling_type == 1 ? Pooling::Mean : Pooling::Last;
    if (req.embedding ? n_prompt > opts_.context : n_prompt >= opts_.context)
      return invalid("prompt of " + std::to_string(n_prompt) + " tokens does not fit the context of " +
                     std::to_string(opts_.context) + " tokens" + (req.embedding ? "" : " with room to generate"));

    auto p = std::make_unique<PendingRequest>();
    p->max_len = int(req.embedding ? n_prompt : std::min<int64_t>(n_prompt + req.max_tokens, opts_.context));
    p->pages_needed = (p->max_len + opts_.page_tokens - 1) / opts_.page_tokens;
    if (p->pages_needed > kv_->n_pages())
      return invalid("request needs " + std::to_string(p->pages_needed) + " KV pages (" + std::to_string(p->max_len) +
                     " tokens); the pool has " + std::to_string(kv_->n_pages()));
    p->handle = std::make_shared<Handle::State>();
    p->handle->id = next_id_.fetch_add(1);
    p->req = std::move(req);
    p->cb = std::move(cb);
    p->submitted = Clock::now();
    Handle h(p->handle);
    if (auto err = scheduler_->submit(p)) return *err;
    return h;
  }

  EngineStats stats() const override { return scheduler_->stats(); }
  void flush_prefix_cache() override { scheduler_->request_flush(); }
  int n_vocab() const override { return model_->hparams().n_vocab; }
  int n_embd() const override { return model_->hparams().n_embd; }
  const tokenizer::Tokenizer& tokenizer() const override { return *tok_; }
  const EngineOptions& options() const override { return opts_; }

 private:
  EngineOptions opts_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<model::KvPool> kv_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace

std::unique_ptr<Engine> Engine::create(const EngineOptions& opts) { return std::make_unique<EngineImpl>(opts); }

}  // namespace infer::engine
