// INFER.RAG model vset {QUERY text | FP32 blob | VALUES n v...} [QUESTION text] [COUNT k] [EF n]
//   [FILTER expr] [FILTER-EF n] [DOCKEY attr] [TEMPLATE plain|chat|name] [TOOLS json [TOOLCHOICE c]] [CHATARGS json]
//   [MAXTOKENS n] [TEMP t] [TOPK k] [TOPP p] [MINP p] [REPEAT-PENALTY r] [SEED s] [STOP s]... [TIMEOUT ms]
//   [LOGPROBS n] [FORMAT json | JSONSCHEMA schema | GRAMMAR gbnf] [WITHSTATS] [STREAM key] [WITHSOURCES]
//   [EMBEDDER name] [CACHE key [THRESHOLD similarity] [TTL seconds] [SAMPLED]]
// A vector query needs QUESTION (the text put to the model); a QUERY text is the question unless
// QUESTION is given. Every option but STOP may be given once.
//
// One-command retrieval-augmented generation, in up to three steps:
//   1. QUERY text is embedded off the main thread with the embedding model's default pooling, as
//      INFER.EMBED without POOLING embeds documents (skipped for a vector query). The embedding model
//      is EMBEDDER name (a dedicated embedder such as a bert model, which embeds far better than a
//      chat model's last hidden state) or, without EMBEDDER, the generating model itself;
//   1b. a chat prompt (TEMPLATE chat) is rendered through the model's chat template and its text around
//      the documents tokenised, off the main thread (needs only the question);
//   2. on the main thread, in one step (a consistent snapshot): search the set, take each hit's
//      document key from its attribute DOCKEY (default "tokens"), check the caller may read it (ACL)
//      and that it lives in the set's hash slot (cluster), copy its token blob out, and assemble the
//      prompt from the documents' tokens as stored (never re-tokenised);
//   3. generate off the main thread, then reply on it.
// Prompt layout. TEMPLATE plain (the default when the model has no chat template): the documents' ids
// in rank order, then the text "\n\nQuestion: <question>\nAnswer:" tokenised without BOS, which is exactly
// what INFER.GENERATE TOKENS k1 k2 ... PROMPT "<that text>" builds. TEMPLATE chat: the model's chat
// template (engine/chat_prompt.h) with a system turn "Answer the question using the documents
// below.\n\n<documents>" and a user turn holding the question; each document's ids go in without
// BOS/EOS, each followed by "\n\n". A template that refuses a system turn gets one user turn holding
// the system text, the documents, then the question. TEMPLATE name: chat through the model's template
// tokenizer.chat_template.<name> (or a built-in format of that name); TOOLS and CHATARGS go to the
// template. TEMPLATE chat is the default when the model has a chat template.
// COUNT defaults to 3 documents. TIMEOUT covers the whole command (embedding, retrieval, generation)
// through the engine requests' deadline, never a Redis block timeout (see generation_job.h).
// Documents: a hit without the DOCKEY attribute is skipped; so is one whose key is missing (evicted,
// expired or deleted since it was indexed), which WITHSOURCES lists as "missing", and one whose value
// is no token list for the model (another type, a corrupt blob, another vocabulary), listed as
// "invalid". A key the caller may not read fails the command with NOPERM and is logged to ACL LOG,
// like Redis's own key denials; so does a key past the context (refused from its size).
// CACHE (semantic_cache.h): the query's vector (QUERY text embedded, or the vector given) is looked up
// before retrieval, under a fingerprint that adds the set's name, the retrieval options, the EMBEDDER
// and a QUESTION given apart from QUERY; a hit replies with the entry's answer and sources.
// Reply: the generated text; with WITHSOURCES, WITHSTATS or LOGPROBS a map {text, [WITHSTATS fields],
// [logprobs], sources: [[element, score, key, status]...], prompt_tokens}, status "used", "missing" or
// "invalid" (sources and prompt_tokens with WITHSOURCES).
#include <memory>

#include <nlohmann/json.hpp>

#include "redis/args.h"
#include "redis/background.h"
#include "redis/chat_args.h"
#include "redis/cluster_slots.h"
#include "redis/commands.h"
#include "redis/generation_job.h"
#include "redis/models.h"
#include "redis/settings.h"
#include "redis/stats.h"
#include "redis/token_keys.h"
#include "redis/vset_handlers.h"
#include "redis/vset_type.h"

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
  const char* status;  // "used"; "missing" or "invalid": nothing of it is in the prompt
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
      rm::ReplyWithCString(ctx, s.status);
    }
    rm::ReplyWithCString(ctx, "prompt_tokens");
    rm::ReplyWithLongLong(ctx, static_cast<long long>(prompt_tokens));
  }
  bool load_cached(const nlohmann::json& e) override {
    if (!GenerationJob::load_cached(e)) return false;
    for (const auto& s : e.at("sources")) {
      const std::string status = s.at(3).get<std::string>();
      const char* known = status == "used" ? "used" : status == "missing" ? "missing" : "invalid";
      sources.push_back({bytes_of(s.at(0)), s.at(1).get<float>(), bytes_of(s.at(2)), known});
    }
    prompt_tokens = e.at("rag_prompt_tokens").get<size_t>();
    return true;
  }
  void save_cached(nlohmann::ordered_json& e) const override {
    GenerationJob::save_cached(e);
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const Source& s : sources) list.push_back({json_bytes(s.element), s.score, json_bytes(s.key), s.status});
    e["sources"] = std::move(list);
    e["rag_prompt_tokens"] = prompt_tokens;
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
  ChatInputs chat_inputs;  // TEMPLATE name, TOOLS, CHATARGS (the turns are made from the question)
  // The chat prompt's token pieces around the documents, made off the main thread before step 2.
  bool chat_ready = false;
  std::vector<int32_t> chat_head, chat_separator, chat_tail;
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
      // RAG searches here, on the main thread, so the search's size is bounded as VSIM's is where it
      // cannot block.
      if (const uint64_t bytes = k.set->estimated_search_bytes(job->search); bytes > vector::kMainThreadSearchBytes) {
        job->error = vector::main_thread_search_error(bytes) + "; lower COUNT, EF or FILTER-EF";
        return false;
      }
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
          job->sources.push_back({*h.name, h.score, key, "missing"});  // checked after ACL: existence is data too
        } else {
          std::vector<int32_t> ids;  // one document past the context is refused before it is copied
          KeyError ke = read_token_key(ctx, kname, tok, &ids, static_cast<size_t>(job->model->engine->options().context));
          if (ke.bad_value) {  // one bad document must not fail the query: it is left out and listed
            job->sources.push_back({*h.name, h.score, key, "invalid"});
          } else if (ke) {
            job->error_code = ke.code;
            err = ke.message;
          } else {
            docs.push_back(std::move(ids));
            job->sources.push_back({*h.name, h.score, key, "used"});
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
  try {
    if (!job->chat) {
      for (const auto& d : docs) ids.insert(ids.end(), d.begin(), d.end());
      tokenizer::EncodeOptions o;
      o.add_special = ids.empty();  // BOS only when no document brought its own
      auto q = tok.encode(std::string(kPlainSuffixHead) + job->question + kPlainSuffixTail, o);
      ids.insert(ids.end(), q.begin(), q.end());
    } else {
      ids = job->chat_head;
      for (const auto& d : docs) {
        for (int32_t id : d)
          if (id != tok.bos() && id != tok.eos()) ids.push_back(id);
        ids.insert(ids.end(), job->chat_separator.begin(), job->chat_separator.end());
      }
      ids.insert(ids.end(), job->chat_tail.begin(), job->chat_tail.end());
    }
  } catch (const std::exception& e) {
    job->error = std::string("cannot assemble the prompt: ") + e.what();
    return false;
  }
  job->prompt_tokens = ids.size();
  if (std::string e = job->model->engine->refuse_generation_length(ids.size(), job->gen.max_tokens, false); !e.empty()) {
    job->error = e + " (" + std::to_string(docs.size()) + " documents); lower COUNT or MAXTOKENS";
    return false;
  }
  return true;
}

// Step 2 then 3, on the main thread with the client blocked. Always ends in UnblockClient, now or
// from the engine.
void retrieve_and_generate(RedisModuleCtx* ctx, RagJob* job) {
  if (job->cancellation->requested()) return complete(job);
  if (!retrieve_and_assemble(ctx, job)) return complete(job);
  submit_generation(job, std::move(job->gen));
}

// Step 1b on a background thread: the chat rendered with a marker where the documents go, and the text
// before and after it tokenised (special tokens parsed; BOS only when the rendering lacks it).
void render_chat_pieces(RagJob* job) {
  const engine::Engine& e = *job->model->engine;
  const tokenizer::Tokenizer& tok = e.tokenizer();
  const std::string system = std::string(kChatSystem) + kDocsMark;
  const std::string user_with_documents = system + job->question;
  ChatInputs in = job->chat_inputs;
  in.pairs = {{"system", system}, {"user", job->question}};
  std::string text;
  try {
    text = in.render(e, job);
  } catch (const engine::ChatError& with_system) {
    in.pairs = {{"user", user_with_documents}};  // e.g. Gemma's "System role not supported"
    try {
      text = in.render(e, job);
    } catch (const engine::ChatError&) {
      throw with_system;
    }
  }
  const size_t at = text.find(kDocsMark);
  if (at == std::string::npos)
    throw engine::ChatError(in.keyword + ": the chat template dropped the system text that holds the documents");
  const std::string head = text.substr(0, at);
  tokenizer::EncodeOptions continued;  // text that continues the assembled ids
  continued.add_special = false;
  continued.continuation = true;
  job->chat_head = tok.encode(head, engine::chat_encode_options(tok, head));
  job->chat_separator = tok.encode("\n\n", continued);
  job->chat_tail = tok.encode(text.substr(at + std::char_traits<char>::length(kDocsMark)), continued);
}

// Main thread (event-loop one-shot) after the chat's pieces are made.
void after_chat_render(void* data) {
  auto* job = static_cast<RagJob*>(data);
  try {
    if (!job->error.empty()) return complete(job);
    RedisModuleCtx* ctx = rm::GetThreadSafeContext(job->bc);
    retrieve_and_generate(ctx, job);
    rm::FreeThreadSafeContext(ctx);
  } catch (const std::exception& e) {
    job->error = std::string("internal error: ") + e.what();
    complete(job);
  }
}

// Step 2 once the query is known: a chat's pieces are made first (off the main thread), then back here.
void retrieve_when_ready(RedisModuleCtx* ctx, RagJob* job) {
  if (!job->chat || job->chat_ready) return retrieve_and_generate(ctx, job);
  job->chat_ready = true;
  const size_t bytes = job->question.size() + job->chat_inputs.tools.size() + job->chat_inputs.chat_args.size();
  const bool queued = run_in_background(bytes, [job] {
    try {
      render_chat_pieces(job);
    } catch (const engine::ChatError& e) {
      job->error = e.what();
    } catch (const std::exception& e) {
      job->error = std::string("cannot assemble the prompt: ") + e.what();
    }
    rm::EventLoopAddOneShot(after_chat_render, job);
  });
  if (!queued) {
    ++stats().busy_replies;
    job->error_code = "BUSY";
    job->error = "too many requests waiting to be submitted; retry later";
    complete(job);
  }
}

// Main thread: the cache had no answer; retrieve and generate.
void retrieve_after_cache_miss(GenerationJob* g) {
  auto* job = static_cast<RagJob*>(g);
  if (job->cancellation->requested()) return complete(job);
  RedisModuleCtx* ctx = rm::GetThreadSafeContext(job->bc);
  retrieve_when_ready(ctx, job);
  rm::FreeThreadSafeContext(ctx);
}

// Step 2, or with CACHE a lookup of the query's vector first.
void look_up_or_retrieve(RedisModuleCtx* ctx, RagJob* job) {
  if (!job->cache) return retrieve_when_ready(ctx, job);
  job->cache->vector = job->query;
  cache_lookup(ctx, job, retrieve_after_cache_miss);
}

// Main thread (event-loop one-shot) after the query embedding is done.
void after_embedding(void* data) {
  auto* job = static_cast<RagJob*>(data);
  try {
    // Past the deadline: replied as -TIMEOUT from the result.
    if (job->result.finish == engine::FinishReason::Deadline) return complete(job);
    if (job->result.finish != engine::FinishReason::Stop || job->result.embedding.empty()) {
      job->error = job->result.finish == engine::FinishReason::Error ? "query embedding failed: " + job->result.error
                                                                    : "query embedding did not finish";
      return complete(job);
    }
    job->query = std::move(job->result.embedding);
    job->result = engine::Result{};
    // A context bound to the blocked client reads keys in the client's database.
    RedisModuleCtx* ctx = rm::GetThreadSafeContext(job->bc);
    look_up_or_retrieve(ctx, job);
    rm::FreeThreadSafeContext(ctx);
  } catch (const std::exception& e) {
    job->error = std::string("internal error: ") + e.what();
    complete(job);
  }
}

}  // namespace

namespace {

// INFER.RAG's arguments, parsed without touching the keyspace (also for key-position queries).
struct RagArgs {
  RedisModuleString* query_text = nullptr;  // QUERY text: argv's, held by the embedding request
  std::vector<float> query;  // the vector query (FP32 / VALUES)
  std::optional<std::string> question;
  vector::SearchOptions search;
  std::optional<vector::Filter> filter;
  RedisModuleString* filter_text = nullptr;  // FILTER as given (argv), for CACHE's fingerprint
  std::optional<std::string> template_name;  // plain, chat or a template's name
  ChatOptions chat_options;                   // TOOLS, CHATARGS, TOOLCHOICE
  std::optional<std::string> embedder_name;
  std::string dockey = "tokens";
  bool with_sources = false;
  GenerationOptions options;
};

// The question is tokenised on the main thread, so its length is checked before it is even copied.
std::string question_too_long(const char* what, const RedisModuleString* text) {
  const auto inline_max = static_cast<size_t>(settings().inline_max_bytes);
  if (view(text).size() <= inline_max) return "";
  return std::string(what) + " of " + std::to_string(view(text).size()) + " bytes is over infer.inline-max-bytes (" +
         std::to_string(inline_max) +
         "): INFER.RAG tokenises the question on the main thread; shorten it, give a shorter QUESTION, or raise "
         "infer.inline-max-bytes";
}

bool parse(RedisModuleString** argv, int argc, RagArgs* a, std::string* err) {
  a->options = default_generation_options();
  a->search.count = 3;  // a few documents by default
  int i = 3;
  if (is_word(argv[i], "QUERY")) {
    a->query_text = argv[i + 1];
    i += 2;
  } else {
    auto v = parse_vector(argv, argc, &i, err);
    if (!v) return false;
    a->query = std::move(*v);
  }
  GivenOnce once;
  for (; i < argc; ++i) {
    RedisModuleString* w = argv[i];
    const bool has_value = i + 1 < argc;
    long long n = 0;
    auto first = [&](const char* keyword) { return once.first(keyword, err); };
    if (is_word(w, "WITHSOURCES")) {
      if (!first("WITHSOURCES")) return false;
      a->with_sources = true;
    } else if (is_word(w, "QUESTION") && has_value) {
      if (!first("QUESTION")) return false;
      if (*err = question_too_long("QUESTION", argv[i + 1]); !err->empty()) return false;
      a->question = str(argv[++i]);
    } else if (is_word(w, "COUNT") && has_value) {
      if (!first("COUNT") || !parse_int(argv[++i], 1, 1000, "COUNT", &n, err)) return false;
      a->search.count = static_cast<size_t>(n);
    } else if (is_word(w, "EF") && has_value) {
      if (!first("EF") || !parse_int(argv[++i], 1, 1000000, "EF", &n, err)) return false;
      a->search.ef = static_cast<size_t>(n);
    } else if (is_word(w, "FILTER-EF") && has_value) {
      if (!first("FILTER-EF") || !parse_int(argv[++i], 1, 100000000, "FILTER-EF", &n, err)) return false;
      a->search.filter_ef = static_cast<size_t>(n);
    } else if (is_word(w, "FILTER") && has_value) {
      if (!first("FILTER")) return false;
      try {
        a->filter_text = argv[i + 1];
        a->filter = vector::Filter::parse(view(argv[++i]));
      } catch (const vector::FilterError& e) {
        return *err = e.what(), false;
      }
    } else if (is_word(w, "EMBEDDER") && has_value) {
      if (!first("EMBEDDER")) return false;
      a->embedder_name = str(argv[++i]);
    } else if (is_word(w, "DOCKEY") && has_value) {
      if (!first("DOCKEY")) return false;
      if (view(argv[i + 1]).size() > kMaxNameBytes)
        return *err = "DOCKEY of " + std::to_string(view(argv[i + 1]).size()) + " bytes is longer than " +
                      std::to_string(kMaxNameBytes),
               false;
      a->dockey = str(argv[++i]);
    } else if (is_word(w, "TEMPLATE") && has_value) {
      if (!first("TEMPLATE")) return false;
      if (view(argv[i + 1]).empty() || view(argv[i + 1]).size() > kMaxTemplateNameBytes)
        return *err = "TEMPLATE must be plain, chat or the name of a chat template (1 to " +
                      std::to_string(kMaxTemplateNameBytes) + " bytes)",
               false;
      a->template_name = str(argv[++i]);
    } else if (!has_value && (is_word(w, "QUESTION") || is_word(w, "COUNT") || is_word(w, "EF") ||
                              is_word(w, "FILTER-EF") || is_word(w, "FILTER") || is_word(w, "EMBEDDER") ||
                              is_word(w, "DOCKEY") || is_word(w, "TEMPLATE"))) {
      return *err = needs_value(view(w)), false;
    } else if (ChatParse c = parse_chat_option(argv, argc, &i, &a->chat_options, err,
                                               {"TOOLS", "CHATARGS", "TOOLCHOICE"});
               c != ChatParse::NotOption) {
      if (c == ChatParse::Error) return false;
    } else if (OptionParse p = parse_generation_option(argv, argc, &i, &a->options, err, kWithStats | kStream | kCache);
               p != OptionParse::Parsed) {
      if (p == OptionParse::NotOption) *err = unknown_option(argv, i, a->options);
      return false;
    }
  }
  if (!a->query_text && !a->question)
    return *err = "a vector query (FP32 or VALUES) needs QUESTION text: the question put to the model", false;
  if (a->template_name == "plain" && (a->chat_options.tools || a->chat_options.chat_args))
    return *err = std::string(a->chat_options.tools ? "TOOLS" : "CHATARGS") + " needs a chat: TEMPLATE plain has none",
           false;
  if (std::string why = check_tool_choice(a->chat_options, a->options); !why.empty()) return *err = why, false;
  if (std::string why = check_generation_options(a->options); !why.empty()) return *err = why, false;
  return true;
}

// getkeys-api: the vector set, and the STREAM key when given (a keyword, so key specs cannot place it
// for Redis 7.0's cluster routing and ACL checks).
int report_keys(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 5) return REDISMODULE_OK;  // the command will fail anyway
  rm::KeyAtPosWithFlags(ctx, 2, REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS);
  RagArgs a;
  std::string err;
  if (!parse(argv, argc, &a, &err)) return REDISMODULE_OK;
  if (a.options.stream_key_pos > 0)
    rm::KeyAtPosWithFlags(ctx, a.options.stream_key_pos, REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_INSERT);
  if (a.options.cache.key_pos > 0) report_cache_key(ctx, a.options.cache.key_pos);
  return REDISMODULE_OK;
}

// Everything of the request but its query that changes the answer (semantic_cache.h).
std::string cache_fingerprint(RedisModuleString** argv, const RagArgs& a, const RagJob& job) {
  Fingerprint f;
  f.add("command", "INFER.RAG");
  f.add("model", model_identity(*job.model));
  f.add("embedder", a.query_text ? model_identity(*job.embedder) : "vector query");
  f.add("set", view(argv[2]));
  // A QUESTION given apart from the query is asked as written: only the same question may hit.
  f.add("question", a.question ? *a.question : std::string());
  f.add_number("count", static_cast<double>(a.search.count));
  f.add_number("ef", static_cast<double>(a.search.ef));
  f.add_number("filter_ef", static_cast<double>(a.search.filter_ef));
  f.add("filter", a.filter_text ? view(a.filter_text) : std::string_view());
  f.add("dockey", job.dockey);
  f.add("template", job.chat ? (a.template_name ? *a.template_name : std::string("chat")) : "plain");
  const ChatOptions& c = a.chat_options;
  for (const auto& [name, given] : {std::pair{"chatargs", c.chat_args}, {"tools", c.tools}, {"toolchoice", c.tool_choice}})
    f.add(name, given ? view(given) : std::string_view());
  add_generation_fingerprint(&f, a.options);
  return f.hex();
}

}  // namespace

int cmd_rag(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (rm::IsKeysPositionRequest(ctx)) return report_keys(ctx, argv, argc);
  if (argc < 5) return rm::WrongArity(ctx);
  RagArgs a;
  std::string err;
  if (!parse(argv, argc, &a, &err)) return reply_error(ctx, err);
  auto job = std::make_unique<RagJob>(nullptr);
  job->query = std::move(a.query);
  if (!a.question) {
    if (err = question_too_long("QUERY text (the question without QUESTION)", a.query_text); !err.empty())
      return reply_error(ctx, err);
  }
  job->question = a.question ? *a.question : str(a.query_text);
  job->search = a.search;
  job->filter = std::move(a.filter);
  if (job->filter) job->search.filter = &*job->filter;
  job->dockey = std::move(a.dockey);
  job->with_sources = a.with_sources;
  RedisModuleString* query_text = a.query_text;
  const GenerationOptions& options = a.options;

  job->model = models().find(view(argv[1]));
  if (!job->model) return reply_error(ctx, "unknown model '" + str(argv[1]) + "' (see INFER.MODELS)");
  if (!job->model->engine->can_generate())
    return reply_error(ctx, "model '" + str(argv[1]) + "' is an embedding model: it cannot generate; " +
                                "give it as EMBEDDER and a generating model first");
  job->embedder = job->model;
  if (a.embedder_name) {
    job->embedder = models().find(*a.embedder_name);
    if (!job->embedder) return reply_error(ctx, "unknown EMBEDDER model '" + *a.embedder_name + "' (see INFER.MODELS)");
  }
  // Without TEMPLATE: chat when the model has a template of its own (or TOOLS/CHATARGS ask for one).
  const bool has_template = job->model->engine->chat_templates().find("") != nullptr;
  job->chat = a.template_name ? *a.template_name != "plain"
                              : has_template || a.chat_options.tools || a.chat_options.chat_args;
  if (job->chat) {
    job->chat_inputs.hold(job.get(), a.chat_options);
    if (a.template_name && *a.template_name != "chat") job->chat_inputs.template_name = *a.template_name;
    job->chat_inputs.keyword = "TEMPLATE " + (a.template_name ? *a.template_name : std::string("chat"));
  }
  {
    VsetKey k(ctx, argv[2], REDISMODULE_READ);
    if (k.wrong_type) return reply_wrongtype(ctx);
    const uint32_t want = query_text ? static_cast<uint32_t>(job->embedder->engine->n_embd())
                                     : static_cast<uint32_t>(job->query.size());
    if (k.set && k.set->input_dim() != want)
      return reply_error(ctx, "vector dimension mismatch: the query has " + std::to_string(want) +
                                  " dimensions, the set takes " + std::to_string(k.set->input_dim()));
  }
  if (refuse_if_cannot_block(ctx, "INFER.RAG")) return REDISMODULE_OK;
  if (refuse_stream_key(ctx, options)) return REDISMODULE_OK;
  if (refuse_cache_key(ctx, options, a.chat_options, *job->embedder)) return REDISMODULE_OK;

  configure_generation(ctx, job.get(), options, options.cache.key ? cache_fingerprint(argv, a, *job) : "");
  apply_generation_options(options, &job->gen);
  job->vset = rm::CreateStringFromString(nullptr, argv[2]);
  job->user = rm::GetCurrentUserName(ctx);
  auto* j = static_cast<RagJob*>(block_client(ctx, std::move(job)));  // owned by the client now
  if (!query_text) {
    look_up_or_retrieve(ctx, j);
    return REDISMODULE_OK;
  }
  // The query is pooled as INFER.EMBED pools without POOLING (the model's pooling_type), as documents
  // stored with INFER.EMBED ... STORE are; normalising changes nothing for cosine search.
  submit_embedding(
      j->embedder, query_text, engine::Pooling::Default, true, j->gen.deadline,
      // the cancellation, not the job: the embedding may finish and the job be freed before this runs
      [cancellation = j->cancellation](engine::Handle h) { cancellation->set(std::move(h)); },
      [j](const engine::SubmitError& refusal) {
        const bool busy = refusal.kind == engine::SubmitError::Kind::Busy;
        if (busy) ++stats().busy_replies;
        j->error_code = busy ? "BUSY" : "ERR";
        j->error = refusal.message;
        complete(j);
      },
      [j](engine::Result&& r) {
        // Engine thread: hand the rest to the main thread (retrieval must hold the lock).
        j->result = std::move(r);
        rm::EventLoopAddOneShot(after_embedding, j);
      });
  return REDISMODULE_OK;
}

}  // namespace infer::redis
