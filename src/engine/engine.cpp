// Engine::create (load, plan memory, make the backend, start the scheduler) and submit (tokenise,
// validate, queue).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "cuda/cuda_backend.h"
#include "engine/chat_prompt.h"
#include "engine/engine.h"
#include "engine/memory_plan.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "grammar/compiled_grammar.h"

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

// llama.cpp's pooling_type enum to ours; absent (-1), 4 (rank) and unknown values pool the last token.
Pooling default_pooling(int pooling_type) {
  switch (pooling_type) {
    case 0: return Pooling::None;
    case 1: return Pooling::Mean;
    case 2: return Pooling::Cls;
    default: return Pooling::Last;
  }
}

}  // namespace

std::string device_unavailable(const model::DeviceOptions& device) {
  std::string why;
  if (device.kind == model::DeviceKind::Cuda && !cuda::available(&why)) return "device cuda is not available: " + why;
  return "";
}

namespace {

class EngineImpl final : public Engine {
 public:
  explicit EngineImpl(const EngineOptions& opts) : opts_(opts) {
    model::LoadOptions lo;
    lo.mmap = opts_.mmap;
    lo.context = opts_.context;  // as requested: LongRoPE's factor choice follows llama.cpp's n_ctx_seq
    check_options(opts_);  // before the model is read
    if (std::string why = device_unavailable(opts_.device); !why.empty()) throw std::runtime_error(why);
    model_ = model::Model::load(opts_.model_path, lo);
    tok_ = tokenizer::Tokenizer::from_gguf(model_->file());
    chat_templates_ = std::make_unique<ModelChatTemplates>(*tok_);
    const model::HParams& hp = model_->hparams();
    // Resolve the plan (threads, per-sequence cap, pool size in whole pages) the way hosts see it.
    const MemoryPlan plan = plan_memory(hp, model_->file().file_size(), opts_);
    opts_ = plan.resolved;
    const int n_pages = plan.n_pages;
    const uint64_t kv_bytes = plan.kv_bytes;
    pool_ = std::make_unique<kernels::ThreadPool>(opts_.threads, opts_.nice);
    // A step has at most step_tokens + max_running rows (scheduler.h).
    const int max_rows = opts_.step_tokens + opts_.max_running;
    try {
      backend_ = cuda::make_backend(*model_, opts_.device, *pool_, max_rows, opts_.page_tokens, n_pages);
    } catch (const std::exception& e) {
      // The device layer's refusals already name the device and the numbers.
      if (opts_.device.kind != model::DeviceKind::Cpu) throw;
      throw std::runtime_error("engine: cannot allocate the KV pool (" + std::to_string(n_pages) + " pages of " +
                               std::to_string(opts_.page_tokens) + " tokens, " + format_bytes(kv_bytes) + " at " +
                               std::to_string(model::KvPool::bytes_per_token(hp, opts_.device.kv_type)) +
                               " bytes/token): " + e.what());
    }
    description_ = backend_->description();
    scheduler_ = std::make_unique<Scheduler>(*model_, *tok_, *pool_, *backend_, opts_);
  }

  ~EngineImpl() override { scheduler_.reset(); }  // before the backend, pool and model it uses

  std::variant<Handle, SubmitError> submit(Request req, Callbacks cb) override {
    auto invalid = [](std::string m) { return SubmitError{SubmitError::Kind::Invalid, std::move(m), 0}; };
    if (req.prompt_ids.empty()) {
      if (req.prompt_text.empty()) return invalid("empty prompt");
      if (std::string why = refuse_prompt_text(req.prompt_text, req.embedding); !why.empty()) return invalid(why);
      bool complete = true;
      try {
        req.prompt_ids = tok_->encode_at_most(req.prompt_text, max_prompt_tokens(req.embedding), {}, &complete);
      } catch (const std::exception& e) {
        return invalid(std::string("cannot tokenise the prompt: ") + e.what());
      }
      if (!complete) return invalid(refuse_prompt_length(req.prompt_ids.size(), req.embedding, true));
      if (req.prompt_ids.empty()) return invalid("the prompt has no tokens");
    }
    const int n_vocab = model_->hparams().n_vocab;
    for (size_t i = 0; i < req.prompt_ids.size(); ++i)
      if (req.prompt_ids[i] < 0 || req.prompt_ids[i] >= n_vocab)
        return invalid("prompt token " + std::to_string(i) + " = " + std::to_string(req.prompt_ids[i]) +
                       " is not in the vocabulary [0, " + std::to_string(n_vocab) + ")");
    const int64_t n_prompt = int64_t(req.prompt_ids.size());
    const model::HParams& hp = model_->hparams();
    if (!req.embedding && !hp.has_classifier())
      return invalid("model '" + hp.arch_name + "' is an embedding model: it cannot generate text, only embed");
    if (!req.embedding && req.max_tokens < 1) return invalid("max_tokens must be >= 1");
    if (!req.embedding && (req.logprobs < -1 || req.logprobs > kMaxLogprobs))
      return invalid("logprobs must be -1 (off) or in [0, " + std::to_string(kMaxLogprobs) + "], got " +
                     std::to_string(req.logprobs));
    if (!req.embedding) {
      try {
        validate_sampling(req.sampling);
      } catch (const std::exception& e) {
        return invalid(e.what());
      }
    }
    if (req.grammar && req.embedding) return invalid("a grammar constrains generation: an embedding has none");
    if (req.grammar && req.grammar->vocab().fingerprint() != tok_->fingerprint())
      return invalid("the grammar was compiled for another vocabulary than the model's");
    if (req.embedding && req.pooling == Pooling::Default) req.pooling = default_pooling(hp.pooling_type);
    if (std::string why = refuse_prompt_length(req.prompt_ids.size(), req.embedding, false); !why.empty())
      return invalid(why);

    auto p = std::make_unique<PendingRequest>();
    p->max_len = int(req.embedding ? n_prompt : std::min<int64_t>(n_prompt + req.max_tokens, opts_.context));
    p->pages_needed = (p->max_len + opts_.page_tokens - 1) / opts_.page_tokens;
    if (p->pages_needed > backend_->n_pages())
      return invalid("request needs " + std::to_string(p->pages_needed) + " KV pages (" + std::to_string(p->max_len) +
                     " tokens); the pool has " + std::to_string(backend_->n_pages()));
    p->handle = std::make_shared<Handle::State>();
    p->handle->id = next_id_.fetch_add(1);
    p->req = std::move(req);
    p->cb = std::move(cb);
    p->submitted = Clock::now();
    Handle h(p->handle);
    if (auto err = scheduler_->submit(p)) return *err;
    return h;
  }

  size_t max_prompt_tokens(bool embedding) const override {
    const size_t context = static_cast<size_t>(opts_.context);
    const size_t in_context = embedding ? context : context - 1;
    // a whole-sequence (non-causal) model computes the prompt in one step: every row sees every other
    return model_->hparams().causal ? in_context : std::min(in_context, static_cast<size_t>(opts_.step_tokens));
  }

  std::string refuse_prompt_length(size_t n_tokens, bool embedding, bool at_least) const override {
    if (n_tokens <= max_prompt_tokens(embedding)) return "";
    const std::string n = (at_least ? "at least " : "") + std::to_string(n_tokens);
    const model::HParams& hp = model_->hparams();
    if (!hp.causal && n_tokens > static_cast<size_t>(opts_.step_tokens))
      return "prompt of " + n + " tokens exceeds the " + std::to_string(opts_.step_tokens) + " tokens a " +
             hp.arch_name + " model computes at once (step_tokens)";
    return "prompt of " + n + " tokens does not fit the context of " + std::to_string(opts_.context) + " tokens" +
           (embedding ? "" : " with room to generate");
  }

  std::string refuse_prompt_text(std::string_view text, bool embedding) const override {
    return refuse_prompt_length(tok_->min_tokens(text), embedding, true);
  }

  std::string refuse_generation_length(size_t n_prompt, long long max_tokens, bool at_least) const override {
    if (static_cast<long long>(n_prompt) + max_tokens <= opts_.context) return "";
    return "prompt of " + std::string(at_least ? "at least " : "") + std::to_string(n_prompt) +
           " tokens plus MAXTOKENS " + std::to_string(max_tokens) + " exceeds the context of " +
           std::to_string(opts_.context);
  }

  EngineStats stats() const override { return scheduler_->stats(); }
  LatencySummary latency() const override { return scheduler_->latency(); }
  void flush_prefix_cache() override { scheduler_->request_flush(); }
  int n_vocab() const override { return model_->hparams().n_vocab; }
  int n_embd() const override { return model_->hparams().n_embd; }
  bool can_generate() const override { return model_->hparams().has_classifier(); }
  const tokenizer::Tokenizer& tokenizer() const override { return *tok_; }
  const ModelChatTemplates& chat_templates() const override { return *chat_templates_; }
  const EngineOptions& options() const override { return opts_; }
  const std::string& backend_description() const override { return description_; }

 private:
  EngineOptions opts_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<ModelChatTemplates> chat_templates_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<model::Backend> backend_;  // after the pool: a CpuBackend computes on it
  std::string description_;
  std::unique_ptr<Scheduler> scheduler_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace

std::unique_ptr<Engine> Engine::create(const EngineOptions& opts) { return std::make_unique<EngineImpl>(opts); }

}  // namespace infer::engine
