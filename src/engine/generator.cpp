#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <string_view>

#include "cuda/cuda_backend.h"
#include "engine/decode_step.h"

namespace infer::engine {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The page size of the private KV pool; any value works, 16 matches the serving engine's default.
constexpr int kPageTokens = 16;
// Rows whose logits are kept at once when every prompt row's logits are wanted (bounds the buffer to
// 64 MiB for a 151,936-token vocab).
constexpr int64_t kMaxLogitFloats = int64_t(16) << 20;

TopLogits top_logits(const float* logits, int n_vocab, int top_n) {
  TopLogits all(n_vocab);
  for (int i = 0; i < n_vocab; ++i) all[i] = {i, logits[i]};
  auto better = [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; };
  size_t n = top_n < 0 ? all.size() : std::min<size_t>(top_n, all.size());
  std::partial_sort(all.begin(), all.begin() + n, all.end(), better);
  all.resize(n);
  return all;
}

}  // namespace

Generator::Generator(const model::Model& model, const tokenizer::Tokenizer* tok, const GeneratorOptions& opts)
    : model_(model), tok_(tok), opts_(opts) {
  const auto& hp = model.hparams();
  if (!hp.has_classifier())
    throw std::invalid_argument("model '" + hp.arch_name + "' is an embedding model: it cannot generate text, only embed");
  if (opts.threads < 1) throw std::invalid_argument("threads must be >= 1, got " + std::to_string(opts.threads));
  if (opts.context < 1) throw std::invalid_argument("context must be >= 1, got " + std::to_string(opts.context));
  if (opts.prefill_chunk < 1)
    throw std::invalid_argument("prefill chunk must be >= 1, got " + std::to_string(opts.prefill_chunk));
  n_ctx_ = hp.n_ctx_train > 0 ? std::min(opts.context, hp.n_ctx_train) : opts.context;
  const int n_pages = (n_ctx_ + kPageTokens - 1) / kPageTokens;
  if (opts.device.gpu_layers < -1)
    throw std::invalid_argument("gpu layers must be >= 0, or -1 for as many as fit, got " +
                                std::to_string(opts.device.gpu_layers));
  pool_ = std::make_unique<kernels::ThreadPool>(opts.threads);
  backend_ = cuda::make_backend(model, opts.device, *pool_, opts.prefill_chunk, kPageTokens, n_pages);
  page_table_.resize(n_pages);
  for (int i = 0; i < n_pages; ++i) page_table_[i] = i;
  const int64_t logit_rows = std::clamp<int64_t>(kMaxLogitFloats / hp.n_vocab, 1, opts.prefill_chunk);
  logits_.resize(size_t(logit_rows) * hp.n_vocab);
  batch_.seqs = {model::SeqPages{page_table_.data(), n_pages}};
  batch_.rows.reserve(opts.prefill_chunk);
}

Generator::~Generator() = default;

int Generator::n_vocab() const { return model_.hparams().n_vocab; }

int Generator::logit_rows() const { return int(logits_.size() / size_t(n_vocab())); }

void Generator::run_chunk(const int32_t* ids, int n, int pos0, bool want_all) {
  batch_.rows.clear();
  for (int i = 0; i < n; ++i) batch_.rows.push_back({0, pos0 + i, ids[i], want_all || i == n - 1});
  backend_->run(batch_, logits_.data());
}

const float* Generator::forward(const int32_t* ids, int n, int pos0) {
  if (n < 1 || pos0 < 0 || pos0 + n > n_ctx_)
    throw std::invalid_argument("forward: positions [" + std::to_string(pos0) + ", " + std::to_string(pos0 + n) +
                                ") outside the context of " + std::to_string(n_ctx_));
  for (int i = 0; i < n; i += opts_.prefill_chunk)
    run_chunk(ids + i, std::min(opts_.prefill_chunk, n - i), pos0 + i, false);
  return logits_.data();
}

GenerateResult Generator::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                   const std::function<void(const std::string&)>& on_text) {
  const int n_vocab = this->n_vocab();
  const int n_prompt = int(prompt.size());
  auto check_ids = [&](const std::vector<int32_t>& ids, const char* what) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= n_vocab)
        throw std::invalid_argument(std::string(what) + " token " + std::to_string(i) + " is id " +
                                    std::to_string(ids[i]) + ", outside the vocabulary [0, " +
                                    std::to_string(n_vocab) + ")");
  };
  if (prompt.empty()) throw std::invalid_argument("empty prompt: at least one token is needed");
  check_ids(prompt, "prompt");
  check_ids(opts.force, "forced");
  if (opts.max_tokens < 0) throw std::invalid_argument("max tokens must be >= 0, got " + std::to_string(opts.max_tokens));
  if (n_prompt > n_ctx_)
    throw std::invalid_argument("prompt of " + std::to_string(n_prompt) + " tokens is longer than the context of " +
                                std::to_string(n_ctx_));
  // A forced run feeds every forced id but the last: prompt + force - 1 positions.
  if (!opts.force.empty() && n_prompt + int(opts.force.size()) - 1 > n_ctx_)
    throw std::invalid_argument("prompt + forced tokens (" + std::to_string(n_prompt + opts.force.size()) +
                                ") exceed the context of " + std::to_string(n_ctx_));
  const bool forced = !opts.force.empty();
  // Teacher forcing feeds every forced id: no stop strings, no end-of-generation tokens.
  if (opts.grammar && (forced || !tok_))
    throw std::invalid_argument("a grammar needs the tokenizer and no forced tokens");
  DecodeStep step(opts.sampling, n_vocab, tok_, forced ? std::vector<std::string>{} : opts.stop, !forced, on_text,
                  opts.grammar);
  if (opts.logprobs != -1) step.enable_logprobs(opts.logprobs);  // throws outside [0, kMaxLogprobs]

  GenerateResult res;
  res.prompt_ids = prompt;
  res.seed = step.seed();
  const int n_steps = forced ? int(opts.force.size()) : opts.max_tokens;

  // Prefill. Capturing every row's logits needs them all in the buffer, so chunks shrink to fit.
  const auto t_prefill = Clock::now();
  const int chunk = opts.capture_prompt_logits ? std::min(opts_.prefill_chunk, logit_rows()) : opts_.prefill_chunk;
  std::vector<float> cur(n_vocab);
  for (int i = 0; i < n_prompt; i += chunk) {
    const int n = std::min(chunk, n_prompt - i);
    run_chunk(prompt.data() + i, n, i, opts.capture_prompt_logits);
    const int last = opts.capture_prompt_logits ? n - 1 : 0;
    if (opts.capture_prompt_logits)
      for (int r = 0; r < n; ++r)
        res.prompt_logits.push_back(top_logits(logits_.data() + size_t(r) * n_vocab, n_vocab,
                                               opts.logits_top_n != 0 ? opts.logits_top_n : 8));
    std::copy_n(logits_.data() + size_t(last) * n_vocab, n_vocab, cur.data());
  }
  res.prefill_ms = ms_since(t_prefill);
  res.prefill_tps = res.prefill_ms > 0 ? n_prompt * 1000.0 / res.prefill_ms : 0;

  // Decode.
  std::vector<int32_t> history = prompt;
  history.reserve(prompt.size() + n_steps);
  const auto t_decode = Clock::now();
  int n_fed = 0;
  int pos = n_prompt;
  res.finish = FinishReason::Length;
  for (int s = 0; s < n_steps; ++s) {
    if (opts.logits_top_n != 0) res.step_logits.push_back(top_logits(cur.data(), n_vocab, opts.logits_top_n));
    int32_t id = 0;
    if (forced) {
      id = opts.force[s];
      step.score(cur.data(), id);
    } else {
      id = step.sample(cur.data(), history);
    }
    res.ids.push_back(id);  // an end-of-generation id included (GenerateResult::ids)
    if (TokenLogprobs* e = step.logprobs()) res.logprobs.push_back(std::move(*e));
    history.push_back(id);
    if (step.take(id) != DecodeStep::Outcome::Continue) {
      res.finish = FinishReason::Stop;
      break;
    }
    if (s + 1 == n_steps || pos >= n_ctx_) break;  // Length: nothing more to compute
    run_chunk(&id, 1, pos++, false);
    ++n_fed;
    std::copy_n(logits_.data(), n_vocab, cur.data());
  }
  res.decode_ms = ms_since(t_decode);
  res.decode_tps = n_fed > 0 && res.decode_ms > 0 ? n_fed * 1000.0 / res.decode_ms : 0;
  step.finish();
  res.text = step.text();
  return res;
}

std::vector<int32_t> tokenize_prompt(const tokenizer::Tokenizer& tok, const std::string& text, bool chat,
                                     const std::string& template_name) {
  if (!chat) return tok.encode(text, tokenizer::EncodeOptions{true, true});
  ChatRequest c;
  c.messages = normalize_messages(nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}}));
  c.template_name = template_name;
  return tokenize_chat(tok, c);
}

std::vector<int32_t> tokenize_chat(const tokenizer::Tokenizer& tok, const ChatRequest& chat) {
  const std::string text = render_chat(ModelChatTemplates(tok), tok, chat);
  return tok.encode(text, chat_encode_options(tok, text));
}

}  // namespace infer::engine
