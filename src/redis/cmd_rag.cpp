// INFER.RAG model vset {QUERY text | FP32 blob | VALUES n v...} [QUESTION text] [COUNT k] [EF n]
//   [FILTER expr] [FILTER-EF n] [DOCKEY attr] [TEMPLATE plain|chat] [MAXTOKENS n] [TEMP t] [TOPK k]
//   [TOPP p] [MINP p] [REPEAT-PENALTY r] [SEED s] [STOP s]... [TIMEOUT ms] [WITHSOURCES] [EMBEDDER name]
//
// One-command retrieval-augmented generation, in up to three steps:
//   1. QUERY text is embedded off the main thread with the embedding model's default pooling, as
//      INFER.EMBED without POOLING embeds documents (skipped for a vector query). The embedding model
//      is EMBEDDER name (a dedicated embedder such as a bert model, which embeds far better than a
//      chat model's last hidden state) or, without EMBEDDER, the generating model itself;
//   2. on the main thread, in one step (a consistent snapshot): search the set, take each hit's
//      document key from its attribute DOCKEY (default "tokens"), check the caller may read it (ACL)
//      and that it lives in the set's hash slot (cluster), copy its token blob out, and assemble the
//      prompt from the documents' tokens as stored (never re-tokenised);
//   3. generate off the main thread, then reply on it.
// Prompt layout. TEMPLATE plain (the default when the model has no chat template): the documents' ids
// in rank order, then the text "\n\nQuestion: <question>\nAnswer:" tokenised without BOS, which is exactly
// what INFER.GENERATE TOKENS k1 k2 ... PROMPT "<that text>" builds. TEMPLATE chat: the model's chat
// template with a system turn "Answer the question using the documents below.\n\n<documents>" and
// a user turn holding the question; each document's ids go in without BOS/EOS, each followed by "\n\n".
// TEMPLATE chat is the default when the model has a chat template.
// The question is tokenised on the main thread (step 2): it may be at most infer.inline-max-bytes long.
// COUNT defaults to 3 documents. TIMEOUT covers the whole command (embedding, retrieval, generation)
// through the engine requests' deadline, never a Redis block timeout (see generation_job.h).
// Documents: a hit without the DOCKEY attribute is skipped; so is one whose key is missing (evicted,
// expired or deleted since it was indexed), which WITHSOURCES lists as "missing". A key the caller may
// not read fails the command with NOPERM and is logged to ACL LOG, like Redis's own key denials.
// Reply: the generated text; with WITHSOURCES a map {text, sources: [[element, score, key, status]...],
// prompt_tokens}, status "used" or "missing".
#include <memory>

#include <nlohmann/json.hpp>

#include "redis/args.h"
#include "redis/cluster_slots.h"
#include "redis/generation_job.h"
#include "redis/models.h"
#include "redis/settings.h"
#include "redis/token_keys.h"
#include "redis/vset_handlers.h"
#include "redis/vset_type.h"
#include "tokenizer/chat_template.h"

namespace infer::redis {
namespace {

constexpr const char* kPlainSuffixHead = "\n\nQuestion: ";
constexpr const char* kPlainSuffixTail = "\nAnswer:";
constexpr const char* kChatSystem = "Answer the question using the documents below.\n\n";
constexpr const char* kDocsMark = "\x01DOCUMENTS\x01";  // split point in the rendered template

struct Source {
  std::string element;
  float score;
  std::string key;
  bool missing;  // the key did not exist: nothing of it is in the prompt
};

// The generation job plus what retrieval needs; replies like INFER.GENERATE, plus sources WITHSOURCES.
struct RagJob : GenerationJob {
  std::shared_ptr<const LoadedModel> embedder;  // embeds QUERY text: EMBEDDER, else the generating model
  explicit RagJob(std::shared_ptr<const LoadedModel> m) : GenerationJob(std::move(m), "infer.rag") {
    timeout_subject = "INFER.RAG";
  }
  ~RagJob() override {
    if (vset) rm::FreeString(nullptr, vset);
    if (user) rm::FreeString(nullptr, user);
  }
  int extra_reply_fields() const override { return with_sources ? 2 : 0; }
  void reply_extra_fields(RedisModuleCtx* ctx) const override {
    if (!with_sources) return;
    rm::ReplyWithCString(ctx, "sources");
    rm::ReplyWithArray(ctx, static_cast<long>(sources.size()));
    for (const auto& s : sources) {
      rm::ReplyWithArray(ctx, 4);
      rm::ReplyWithStringBuffer(ctx, s.element.data(), s.element.size());
      rm::ReplyWithDouble(ctx, s.score);
      rm::ReplyWithStringBuffer(ctx, s.key.data(), s.key.size());
      rm::ReplyWithCString(ctx, s.missing ? "missing" : "used");
    }
    rm::ReplyWithCString(ctx, "prompt_tokens");
    rm::ReplyWithLongLong(ctx, static_cast<long long>(prompt_tokens));
  }

  // Inputs for step 2 (owned copies: argv is gone by then).
  RedisModuleString* vset = nullptr;
  RedisModuleString* user = nullptr;  // caller's ACL user name
  std::vector<float> query;
  std::string question;
  vector::SearchOptions search;
  std::optional<vector::Filter> filter;
  std::string dockey = "tokens";
  bool chat = false;
  engine::Request gen;  // sampling, max_tokens, stop, deadline; then the prompt
  bool with_sources = false;
  // Results of step 2.
  std::vector<Source> sources;
  size_t prompt_tokens = 0;
};

// Step 2 on the main thread: search, read documents, assemble; returns false with job->error set.
bool retrieve_and_assemble(RedisModuleCtx* ctx, RagJob* job) {
  const tokenizer::Tokenizer& tok = job->model->engine->tokenizer();
  std::vector<std::vector<int32_t>> docs;
  {
    VsetKey k(ctx, job->vset, REDISMODULE_READ);
    if (k.wrong_type) {
      job->error_code = "WRONGTYPE";
      job->error = "the vector set key holds another type";
      return false;
    }
    if (k.set) {
      std::vector<vector::SearchHit> hits;
      try {
        hits = k.set->search(job->query, job->search);
      } catch (const vector::VectorSetError& e) {
        job->error = e.what();
        return false;
      }
      RedisModuleUser* user = rm::GetModuleUserFromUserName(job->user);
      if (!user) {
        job->error = "the calling ACL user no longer exists";
        return false;
      }
      const bool cluster = rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER;
      const unsigned slot = key_slot(view(job->vset));
      for (const auto& h : hits) {
        auto attrs = nlohmann::json::parse(*h.attrs, nullptr, false);
        if (!attrs.is_object() || !attrs.contains(job->dockey) || !attrs[job->dockey].is_string()) continue;
        const std::string key = attrs[job->dockey].get<std::string>();
        RedisModuleString* kname = rm::CreateString(nullptr, key.data(), key.size());
        std::string err;
        if (rm::ACLCheckKeyPermissions(user, kname, static_cast<int>(REDISMODULE_CMD_KEY_ACCESS)) != REDISMODULE_OK) {
          rm::ACLAddLogEntry(ctx, user, kname, REDISMODULE_ACL_LOG_KEY);
          job->error_code = "NOPERM";
          err = "no permission to read document key '" + key + "'";
        } else if (cluster && key_slot(key) != slot) {
          job->error_code = "CROSSSLOT";
          err = "document key '" + key + "' is in another hash slot than the vector set (use a {hash tag})";
        } else if (!rm::KeyExists(ctx, kname)) {
          job->sources.push_back({*h.name, h.score, key, true});  // checked after ACL: existence is data too
        } else {
          std::vector<int32_t> ids;  // one document past the context is refused before it is copied
          KeyError ke = read_token_key(ctx, kname, tok, &ids, static_cast<size_t>(job->model->engine->options().context));
          if (ke) {
            job->error_code = ke.code;
            err = ke.message;
          } else {
            docs.push_back(std::move(ids));
            job->sources.push_back({*h.name, h.score, key, false});
          }
        }
        rm::FreeString(nullptr, kname);
        if (!err.empty()) {
          rm::FreeModuleUser(user);
          job->error = err;
          return false;
        }
      }
      rm::FreeModuleUser(user);
    }
  }
  // Assemble (no keyspace access from here on).
  std::vector<int32_t>& ids = job->gen.prompt_ids;
  tokenizer::EncodeOptions no_special;  // for text that continues the assembled ids
  no_special.add_special = false;
  no_special.continuation = true;
  try {
    if (!job->chat) {
      for (const auto& d : docs) ids.insert(ids.end(), d.begin(), d.end());
      tokenizer::EncodeOptions o;
      o.add_special = ids.empty();  // BOS only when no document brought its own
      auto q = tok.encode(std::string(kPlainSuffixHead) + job->question + kPlainSuffixTail, o);
      ids.insert(ids.end(), q.begin(), q.end());
    } else {
      auto family = tokenizer::detect_chat_family(tok.chat_template());
      if (!family) {
        job->error = "TEMPLATE chat: the model's chat template is missing or of an unknown family";
        return false;
      }
      std::string text = tokenizer::apply_chat_template(
          *family, {{"system", std::string(kChatSystem) + kDocsMark}, {"user", job->question}}, true);
      const size_t at = text.find(kDocsMark);
      ids = tok.encode(text.substr(0, at));
      const auto sep = tok.encode("\n\n", no_special);
      for (const auto& d : docs) {
        for (int32_t id : d)
          if (id != tok.bos() && id != tok.eos()) ids.push_back(id);
        ids.insert(ids.end(), sep.begin(), sep.end());
      }
      auto rest = tok.encode(text.substr(at + std::char_traits<char>::length(kDocsMark)), no_special);
      ids.insert(ids.end(), rest.begin(), rest.end());
    }
  } catch (const std::exception& e) {
    job->error = std::string("cannot assemble the prompt: ") + e.what();
    return false;
  }
  job->prompt_tokens = ids.size();
  const long long need = static_cast<long long>(ids.size()) + job->gen.max_tokens;
  if (need > job->model->engine->options().context) {
    job->error = "prompt of " + std::to_string(ids.size()) + " tokens (" + std::to_string(docs.size()) +
                 " documents) plus MAXTOKENS exceeds the context of " +
                 std::to_string(job->model->engine->options().context) + "; lower COUNT or MAXTOKENS";
    return false;
  }
  return true;
}

// Step 2 then 3, on the main thread with the client blocked. Always ends in UnblockClient, now or
// from the engine.
void retrieve_and_generate(RedisModuleCtx* ctx, RagJob* job) {
  if (job->cancellation->requested()) return unblock_generation(job);
  if (!retrieve_and_assemble(ctx, job)) return unblock_generation(job);
  submit_generation(job, std::move(job->gen));
}

// Main thread (event-loop one-shot) after the query embedding is done.
void after_embedding(void* data) {
  auto* job = static_cast<RagJob*>(data);
  try {
    // Past the deadline: replied as -TIMEOUT from the result.
    if (job->result.finish == engine::FinishReason::Deadline) return unblock_generation(job);
    if (job->result.finish != engine::FinishReason::Stop || job->result.embedding.empty()) {
      job->error = job->result.finish == engine::FinishReason::Error ? "query embedding failed: " + job->result.error
                                                                    : "query embedding did not finish";
      return unblock_generation(job);
    }
    job->query = std::move(job->result.embedding);
    job->result = engine::Result{};
    // A context bound to the blocked client reads keys in the client's database.
    RedisModuleCtx* ctx = rm::GetThreadSafeContext(job->bc);
    retrieve_and_generate(ctx, job);
    rm::FreeThreadSafeContext(ctx);
  } catch (const std::exception& e) {
    job->error = std::string("internal error: ") + e.what();
    unblock_generation(job);
  }
}

}  // namespace

int cmd_rag(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 5) return rm::WrongArity(ctx);
  auto job = std::make_unique<RagJob>(nullptr);
  GenerationOptions options = default_generation_options();
  job->search.count = 3;  // a few documents by default
  std::string err;
  RedisModuleString* query_arg = nullptr;
  std::optional<std::string> template_name;
  std::optional<std::string> embedder_name;
  int i = 3;
  // The question is tokenised on the main thread, so its length is checked before it is even copied.
  const auto inline_max = static_cast<size_t>(settings().inline_max_bytes);
  auto too_long = [&](const char* what, const RedisModuleString* text) {
    return reply_error(ctx, std::string(what) + " of " + std::to_string(view(text).size()) +
                                " bytes is over infer.inline-max-bytes (" + std::to_string(inline_max) +
                                "): INFER.RAG tokenises the question on the main thread; shorten it, give a "
                                "shorter QUESTION, or raise infer.inline-max-bytes");
  };
  if (is_word(argv[i], "QUERY")) {
    query_arg = argv[i + 1];
    i += 2;
  } else {
    auto v = parse_vector(argv, argc, &i, &err);
    if (!v) return reply_error(ctx, err);
    job->query = std::move(*v);
  }
  bool question_given = false;
  for (; i < argc; ++i) {
    RedisModuleString* w = argv[i];
    const bool has_value = i + 1 < argc;
    long long n = 0;
    if (is_word(w, "WITHSOURCES")) {
      job->with_sources = true;
    } else if (is_word(w, "QUESTION") && has_value) {
      if (view(argv[i + 1]).size() > inline_max) return too_long("QUESTION", argv[i + 1]);
      job->question = str(argv[++i]);
      question_given = true;
    } else if (is_word(w, "COUNT") && has_value) {
      if (!parse_int(argv[++i], 1, 1000, "COUNT", &n, &err)) return reply_error(ctx, err);
      job->search.count = static_cast<size_t>(n);
    } else if (is_word(w, "EF") && has_value) {
      if (!parse_int(argv[++i], 1, 1000000, "EF", &n, &err)) return reply_error(ctx, err);
      job->search.ef = static_cast<size_t>(n);
    } else if (is_word(w, "FILTER-EF") && has_value) {
      if (!parse_int(argv[++i], 1, 100000000, "FILTER-EF", &n, &err)) return reply_error(ctx, err);
      job->search.filter_ef = static_cast<size_t>(n);
    } else if (is_word(w, "FILTER") && has_value) {
      try {
        job->filter = vector::Filter::parse(view(argv[++i]));
      } catch (const vector::FilterError& e) {
        return reply_error(ctx, e.what());
      }
    } else if (is_word(w, "EMBEDDER") && has_value) {
      embedder_name = str(argv[++i]);
    } else if (is_word(w, "DOCKEY") && has_value) {
      job->dockey = str(argv[++i]);
    } else if (is_word(w, "TEMPLATE") && has_value) {
      template_name = str(argv[++i]);
      if (template_name != "plain" && template_name != "chat") return reply_error(ctx, "TEMPLATE must be plain or chat");
    } else if (OptionParse p = parse_generation_option(argv, argc, &i, &options, &err, kNoExtras);
               p != OptionParse::Parsed) {
      return reply_error(ctx, p == OptionParse::Error ? err : "unknown option '" + str(w) + "'");
    }
  }
  if (job->filter) job->search.filter = &*job->filter;
  if (query_arg && !question_given) {
    if (view(query_arg).size() > inline_max) return too_long("QUERY text (the question without QUESTION)", query_arg);
    job->question = str(query_arg);
  }
  if (!query_arg && !question_given) return reply_error(ctx, "a vector query needs QUESTION text");

  job->model = models().find(view(argv[1]));
  if (!job->model) return reply_error(ctx, "unknown model '" + str(argv[1]) + "' (see INFER.MODELS)");
  if (!job->model->engine->can_generate())
    return reply_error(ctx, "model '" + str(argv[1]) + "' is an embedding model: it cannot generate; " +
                                "give it as EMBEDDER and a generating model first");
  job->embedder = job->model;
  if (embedder_name) {
    job->embedder = models().find(*embedder_name);
    if (!job->embedder) return reply_error(ctx, "unknown EMBEDDER model '" + *embedder_name + "' (see INFER.MODELS)");
  }
  const tokenizer::Tokenizer& tok = job->model->engine->tokenizer();
  job->chat = template_name ? *template_name == "chat" : !tok.chat_template().empty();
  {
    VsetKey k(ctx, argv[2], REDISMODULE_READ);
    if (k.wrong_type) return rm::ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    const uint32_t want = query_arg ? static_cast<uint32_t>(job->embedder->engine->n_embd())
                                     : static_cast<uint32_t>(job->query.size());
    if (k.set && k.set->input_dim() != want)
      return reply_error(ctx, "vector dimension mismatch: the query has " + std::to_string(want) +
                                  " dimensions, the set takes " + std::to_string(k.set->input_dim()));
  }
  if (refuse_if_cannot_block(ctx, "INFER.RAG")) return REDISMODULE_OK;

  configure_generation(ctx, job.get(), options);
  apply_generation_options(options, &job->gen);
  job->vset = rm::CreateStringFromString(nullptr, argv[2]);
  job->user = rm::GetCurrentUserName(ctx);
  auto* j = static_cast<RagJob*>(block_generation(ctx, std::move(job)));  // owned by the client now
  if (!query_arg) {
    retrieve_and_generate(ctx, j);
    return REDISMODULE_OK;
  }
  // The query is pooled as INFER.EMBED pools without POOLING (the model's pooling_type), as documents
  // stored with INFER.EMBED ... STORE are; normalising changes nothing for cosine search.
  submit_embedding(
      j->embedder, query_arg, engine::Pooling::Default, true, j->gen.deadline,
      [j](engine::Handle h) { j->cancellation->set(std::move(h)); },
      [j](const engine::SubmitError& refusal) {
        j->error_code = refusal.kind == engine::SubmitError::Kind::Busy ? "BUSY" : "ERR";
        j->error = refusal.message;
        unblock_generation(j);
      },
      [j](engine::Result&& r) {
        // Engine thread: hand the rest to the main thread (retrieval must hold the lock).
        j->result = std::move(r);
        rm::EventLoopAddOneShot(after_embedding, j);
      });
  return REDISMODULE_OK;
}

}  // namespace infer::redis
