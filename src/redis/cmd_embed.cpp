// INFER.EMBED model text [POOLING last|mean|cls] [NORMALIZE] [ARRAY] [STORE key element [SETATTR json]]
//
// The model embeds `text` off the main thread (engine Request::embedding) from the prompt's hidden
// states (final-normed; a bert embedder's last layer): POOLING last takes the last token's, POOLING mean
// averages every token's, POOLING cls takes the first's (bert's [CLS]); mean and cls compute the whole
// text, never reusing the prefix cache. Without POOLING the model's GGUF <arch>.pooling_type decides
// (mean, cls or last; an embedding model such as bge says which it was trained with). NORMALIZE L2-normalises the vector;
// without it the pooled vector is returned as the model produced it (vector sets normalise on add, so
// STORE and cosine search do not depend on it). Reply: the vector as an FP32 blob, or with ARRAY as an
// array of doubles.
// STORE adds it to the vector set `key` as `element` (created Q8, M 16 when missing) from the module's
// write queue on the main thread (write_queue.h: in order, never during a client pause or on a replica),
// and replies like INFER.VADD: 1 when the element was added, 0 when an element of that name was
// updated (its vector and, with SETATTR, attributes replaced). ARRAY cannot be combined with STORE. The add is replicated as a plain INFER.VADD with the
// FP32 blob, so replicas and the AOF need no model. If the client disconnects or is unblocked before the
// embedding is ready, nothing is stored.
#include <chrono>
#include <memory>
#include <optional>


#include "redis/args.h"
#include "redis/background.h"
#include "redis/blocked_call.h"
#include "redis/cluster_slots.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/settings.h"
#include "redis/stats.h"
#include "redis/vset_handlers.h"
#include "redis/vset_type.h"

namespace infer::redis {
namespace {

struct EmbedJob : BlockedJob {
  EmbedJob() : BlockedJob("infer.embed", "embedding") {}
  ~EmbedJob() override {
    if (store_key) rm::FreeString(nullptr, store_key);
    if (element) rm::FreeString(nullptr, element);
  }
  int reply(RedisModuleCtx* ctx) override;
  bool has_writes() const override {
    return store_key && !refusal && result.finish == engine::FinishReason::Stop && !result.embedding.empty();
  }
  void write(RedisModuleCtx* ctx, Writable writable) override;

  std::shared_ptr<const LoadedModel> model;  // keeps the engine alive until the job is freed
  engine::Result result;                     // written by on_done before complete()
  std::optional<engine::SubmitError> refusal;
  bool array = false;
  RedisModuleString* store_key = nullptr;    // owned (NULL-context strings)
  RedisModuleString* element = nullptr;
  std::optional<std::string> attrs;
  std::string store_error;  // the STORE's error reply, with its code
  bool added = false;       // the STORE added a new element (else it updated one)
  bool asked = false;       // routed here by ASKING: the slot was importing when the command ran
};

// Adds the embedding to the set and replicates the add; returns an error reply or "".
std::string store(RedisModuleCtx* ctx, EmbedJob* job, bool* added) {
  const std::vector<float>& v = job->result.embedding;
  VsetKey k(ctx, job->store_key, REDISMODULE_READ | REDISMODULE_WRITE);
  if (k.wrong_type) return REDISMODULE_ERRORMSG_WRONGTYPE;
  try {
    if (!k.set) {
      vector::SetConfig cfg;
      cfg.dim = static_cast<uint32_t>(v.size());
      auto fresh = std::make_unique<vector::VectorSet>(cfg);
      *added = fresh->add(view(job->element), v, job->attrs);
      k.store(std::move(fresh));
    } else {
      *added = k.set->add(view(job->element), v, job->attrs);
    }
  } catch (const vector::VectorSetError& e) {
    return std::string("ERR STORE: ") + e.what();
  }
  const char* blob = reinterpret_cast<const char*>(v.data());
  const size_t blob_len = v.size() * sizeof(float);
  if (job->attrs)
    rm::Replicate(ctx, "INFER.VADD", "scbscb", job->store_key, "FP32", blob, blob_len, job->element, "SETATTR",
                  job->attrs->data(), job->attrs->size());
  else
    rm::Replicate(ctx, "INFER.VADD", "scbs", job->store_key, "FP32", blob, blob_len, job->element);
  rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "vadd", job->store_key);
  return "";
}

void EmbedJob::write(RedisModuleCtx* ctx, Writable writable) {
  if (client_gone) return;  // nothing is stored for a client that left (the header says so)
  if (writable == Writable::Replica) {
    store_error = "READONLY this node became a replica while the text was embedded; nothing stored";
    return;
  }
  // In a cluster the slot may have moved while the text was embedded: the client gets the redirection
  // and no stray set is created on a node that does not own the slot.
  store_error = cluster_write_refusal(ctx, view(store_key), nullptr, asked);
  if (store_error.empty()) store_error = store(ctx, this, &added);
}

int EmbedJob::reply(RedisModuleCtx* ctx) {
  if (refusal) {
    if (refusal->kind == engine::SubmitError::Kind::Busy)
      return reply_coded_error(ctx, "BUSY", refusal->message + "; retry in " +
                                                std::to_string(refusal->retry_after_ms) + " ms");
    return reply_error(ctx, refusal->message);
  }
  const engine::Result& r = result;
  if (r.finish == engine::FinishReason::Error) return reply_error(ctx, "embedding failed: " + r.error);
  if (r.finish == engine::FinishReason::Deadline) return reply_coded_error(ctx, "TIMEOUT", "embedding timed out");
  if (r.finish == engine::FinishReason::Cancelled) return reply_error(ctx, "embedding cancelled");
  if (r.embedding.empty()) return reply_error(ctx, "the model returned no embedding");
  if (store_key) {
    if (!store_error.empty()) return rm::ReplyWithError(ctx, store_error.c_str());
    return rm::ReplyWithLongLong(ctx, added ? 1 : 0);
  }
  if (array) {
    rm::ReplyWithArray(ctx, static_cast<long>(r.embedding.size()));
    for (float x : r.embedding) rm::ReplyWithDouble(ctx, x);
    return REDISMODULE_OK;
  }
  return rm::ReplyWithStringBuffer(ctx, reinterpret_cast<const char*>(r.embedding.data()),
                                   r.embedding.size() * sizeof(float));
}

// A tokenised long text on its way back to the main thread. Freed on the main thread.
struct PendingSubmit {
  ~PendingSubmit() {
    if (held_text) rm::FreeString(nullptr, held_text);
  }
  std::shared_ptr<const LoadedModel> model;
  RedisModuleString* held_text = nullptr;  // the text, held (not copied) for the background thread
  std::optional<engine::SubmitError> refusal;  // found while tokenising: replied instead of submitting
  engine::Request req;
  std::function<void(engine::Handle)> submitted;
  std::function<void(const engine::SubmitError&)> refused;
  engine::Callbacks cb;
};

void submit_now(PendingSubmit& p) {
  if (p.refusal) return p.refused(*p.refusal);
  auto result = p.model->engine->submit(std::move(p.req), std::move(p.cb));
  if (auto* refusal = std::get_if<engine::SubmitError>(&result)) return p.refused(*refusal);
  p.submitted(std::get<engine::Handle>(result));
}

void submit_on_main(void* data) {
  std::unique_ptr<PendingSubmit> p(static_cast<PendingSubmit*>(data));
  try {
    submit_now(*p);
  } catch (const std::exception& e) {
    p->refused({engine::SubmitError::Kind::Invalid, e.what(), 0});
  }
}

}  // namespace

void submit_embedding(std::shared_ptr<const LoadedModel> model, RedisModuleString* text, engine::Pooling pooling,
                      bool normalize, std::chrono::steady_clock::time_point deadline,
                      std::function<void(engine::Handle)> submitted,
                      std::function<void(const engine::SubmitError&)> refused,
                      std::function<void(engine::Result&&)> on_done) {
  auto p = std::make_unique<PendingSubmit>();
  p->model = std::move(model);
  p->req.embedding = true;
  p->req.pooling = pooling;
  p->req.normalize = normalize;
  p->req.deadline = deadline;
  p->submitted = std::move(submitted);
  p->refused = std::move(refused);
  p->cb.on_done = std::move(on_done);
  const std::string_view text_view = view(text);
  if (text_view.size() <= kSyncTokenizeBytes) {
    p->req.prompt_text = std::string(text_view);  // the engine tokenises it in submit: short, so now is fine
    return submit_now(*p);
  }
  p->held_text = rm::hold_for_threads(text);
  PendingSubmit* raw = p.release();
  const bool queued = run_in_background(text_view.size(), [raw, text_view = view(raw->held_text)] {
    // Tokenised here as the engine would (BOS per vocabulary); the tokenizer is thread-safe. A text
    // that cannot fit is refused before it is tokenised.
    const engine::Engine& engine = *raw->model->engine;
    try {
      std::string why = engine.refuse_prompt_text(text_view, true);
      if (why.empty()) {
        bool complete = true;
        raw->req.prompt_ids =
            engine.tokenizer().encode_at_most(text_view, engine.max_prompt_tokens(true), {}, &complete);
        if (!complete) why = engine.refuse_prompt_length(raw->req.prompt_ids.size(), true, true);
      }
      if (!why.empty()) raw->refusal = engine::SubmitError{engine::SubmitError::Kind::Invalid, std::move(why), 0};
    } catch (const std::exception& e) {
      raw->refusal =
          engine::SubmitError{engine::SubmitError::Kind::Invalid, std::string("cannot tokenise: ") + e.what(), 0};
    }
    rm::EventLoopAddOneShot(submit_on_main, raw);
  });
  if (!queued) {
    std::unique_ptr<PendingSubmit> back(raw);
    back->refused({engine::SubmitError::Kind::Busy, "too many texts waiting to be tokenised", 100});
  }
}

namespace {

// INFER.EMBED model text [POOLING last|mean|cls] [NORMALIZE] [ARRAY] [STORE key element [SETATTR json]]
struct EmbedArgs {
  engine::Pooling pooling = engine::Pooling::Default;
  bool normalize = false;
  bool array = false;
  int store_pos = 0;  // argv index of STORE's key; 0: no STORE
  RedisModuleString* store_key = nullptr;
  RedisModuleString* element = nullptr;
  RedisModuleString* attrs = nullptr;  // SETATTR's json
};

// Parses argv without touching the keyspace (also used to answer the server's key-position queries).
bool parse(RedisModuleString** argv, int argc, EmbedArgs* a, std::string* err) {
  GivenOnce once;
  for (int i = 3; i < argc; ++i) {
    if (is_word(argv[i], "POOLING")) {
      if (!once.first("POOLING", err)) return false;
      if (++i >= argc) return *err = needs_value("POOLING", "a value (last, mean or cls)"), false;
      if (is_word(argv[i], "mean"))
        a->pooling = engine::Pooling::Mean;
      else if (is_word(argv[i], "last"))
        a->pooling = engine::Pooling::Last;
      else if (is_word(argv[i], "cls"))
        a->pooling = engine::Pooling::Cls;
      else
        return *err = "POOLING must be last, mean or cls", false;
    } else if (is_word(argv[i], "NORMALIZE")) {
      if (!once.first("NORMALIZE", err)) return false;
      a->normalize = true;
    } else if (is_word(argv[i], "ARRAY")) {
      if (!once.first("ARRAY", err)) return false;
      a->array = true;
    } else if (is_word(argv[i], "STORE")) {
      if (a->store_key) return *err = "STORE given twice", false;
      if (i + 2 >= argc) return *err = needs_value("STORE", "a key and an element name: STORE key element [SETATTR json]"), false;
      a->store_pos = i + 1;
      a->store_key = argv[++i];
      a->element = argv[++i];
      if (i + 2 < argc && is_word(argv[i + 1], "SETATTR")) {
        a->attrs = argv[i + 2];
        i += 2;
      }
    } else {
      return *err = "unknown option '" + str(argv[i]) +
                    "' (POOLING last|mean|cls, NORMALIZE, ARRAY, STORE key element [SETATTR json])",
             false;
    }
  }
  // STORE replies with the add's outcome, not the vector: ARRAY would be silently ignored.
  if (a->array && a->store_key) return *err = "ARRAY and STORE cannot be combined: STORE replies 1 or 0, not the vector", false;
  return true;
}

// getkeys-api: Redis 7.0 routes cluster commands by these positions (key specs alone give none).
int report_keys(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  EmbedArgs a;
  std::string err;
  if (argc < 3 || !parse(argv, argc, &a, &err)) return REDISMODULE_OK;  // the command will fail anyway
  if (a.store_pos) rm::KeyAtPosWithFlags(ctx, a.store_pos, REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_UPDATE);
  return REDISMODULE_OK;
}

}  // namespace

int cmd_embed(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (rm::IsKeysPositionRequest(ctx)) return report_keys(ctx, argv, argc);
  if (argc < 3) return rm::WrongArity(ctx);
  EmbedArgs a;
  std::string err;
  if (!parse(argv, argc, &a, &err)) return reply_error(ctx, err);
  if (a.store_key) {
    if (std::string e = element_name_error(ctx, a.element); !e.empty()) return reply_error(ctx, e);
    if (a.attrs) {
      if (std::string e = attribute_size_error(ctx, view(a.attrs).size()); !e.empty()) return reply_error(ctx, e);
    }
  }
  auto model = models().find(view(argv[1]));
  if (!model) return reply_error(ctx, "unknown model '" + str(argv[1]) + "' (see INFER.MODELS)");
  if (a.store_key) {
    // Refuse what is wrong now rather than after the work; the queued write checks again.
    if (rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE)
      return reply_coded_error(ctx, "READONLY", "STORE cannot write on a replica");
    VsetKey k(ctx, a.store_key, REDISMODULE_READ);
    if (k.wrong_type) return reply_wrongtype(ctx);
    const int n_embd = model->engine->n_embd();
    if (k.set && k.set->input_dim() != static_cast<uint32_t>(n_embd))
      return reply_error(ctx, "STORE: vector dimension mismatch: the model embeds in " + std::to_string(n_embd) +
                                  " dimensions, the set takes " + std::to_string(k.set->input_dim()));
  }
  if (refuse_if_cannot_block(ctx, "INFER.EMBED")) return REDISMODULE_OK;

  auto deadline = std::chrono::steady_clock::time_point::max();
  if (settings().timeout_ms > 0)
    deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(settings().timeout_ms);

  auto owned = std::make_unique<EmbedJob>();
  owned->model = model;
  owned->array = a.array;
  if (a.attrs) owned->attrs = str(a.attrs);
  if (a.store_key) {
    owned->store_key = rm::CreateStringFromString(nullptr, a.store_key);
    owned->element = rm::CreateStringFromString(nullptr, a.element);
    owned->asked = importing_here(ctx, view(a.store_key));
  }
  auto* job = static_cast<EmbedJob*>(block_client(ctx, std::move(owned)));  // owned by the client now
  submit_embedding(
      model, argv[2], a.pooling, a.normalize, deadline,
      [cancellation = job->cancellation](engine::Handle h) { cancellation->set(std::move(h)); },
      [job](const engine::SubmitError& refusal) {
        if (refusal.kind == engine::SubmitError::Kind::Busy) ++stats().busy_replies;
        job->refusal = refusal;
        complete(job);
      },
      [job](engine::Result&& r) {
        // Engine thread. After complete() the job belongs to the main thread.
        job->result = std::move(r);
        complete(job);
      });
  return REDISMODULE_OK;
}

}  // namespace infer::redis
