// INFER.RAG model vset {QUERY text | FP32 blob | VALUES n v...} [QUESTION text] [COUNT k] [EF n]
//   [FILTER expr] [FILTER-EF n] [DOCKEY attr] [TEMPLATE plain|chat] [MAXTOKENS n] [TEMP t] [TOPK k]
//   [TOPP p] [MINP p] [REPEAT-PENALTY r] [SEED s] [STOP s]... [TIMEOUT ms] [WITHSOURCES]
//
// One-command retrieval-augmented generation, in up to three steps:
//   1. QUERY text is embedded by the model off the main thread (skipped for a vector query);
//   2. on the main thread, in one step (a consistent snapshot): search the set, take each hit's
//      document key from its attribute DOCKEY (default "tokens"), check the caller may read it (ACL)
//      and that it lives in the set's hash slot (cluster), copy its token blob out, and assemble the
//      prompt from the documents' tokens as stored (never re-tokenised);
//   3. generate off the main thread, then reply on it.
// Prompt layout. TEMPLATE plain (the default when the model has no chat template): the documents' ids
// in rank order, then the text "\n\nQuestion: <question>\nAnswer:" tokenised without BOS, which is exactly
// what INFER.GENERATE TOKENS k1 k2 ... PROMPT "<that text>" builds. TEMPLATE chat: the model's chat
// template with a system turn "Answer the question using the documents below.\n\n<documents>" and
// a user turn holding the question; each document's ids go in without BOS/EOS, separated by "\n\n".
// COUNT defaults to 3 documents. Reply: the generated text; with WITHSOURCES a map {text, sources: [[element, score, key]...],
// prompt_tokens}.
#include <chrono>
#include <memory>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "redis/args.h"
#include "redis/models.h"
#include "redis/settings.h"
#include "redis/stats.h"
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
};

struct RagJob {
  RedisModuleBlockedClient* bc = nullptr;
  std::shared_ptr<const LoadedModel> model;
  engine::Handle handle;  // the embedding, then the generation
  bool cancelled = false;  // main thread: timeout or disconnect
  bool generating = false;
  // Inputs for step 2 (owned copies: argv is gone by then).
  RedisModuleString* vset = nullptr;
  RedisModuleString* user = nullptr;  // caller's ACL user name
  int db = 0;
  std::vector<float> query;
  std::string question;
  vector::SearchOptions search;
  std::optional<vector::Filter> filter;
  std::string dockey = "tokens";
  bool chat = false;
  engine::Request gen;  // sampling, max_tokens, stop, deadline
  bool with_sources = false;
  long long timeout_ms = 0;
  // Results.
  std::vector<Source> sources;
  size_t prompt_tokens = 0;
  std::string error;        // set: reply it
  const char* error_code = "ERR";
  engine::Result result;
};

std::unordered_map<RedisModuleBlockedClient*, RagJob*>& live_jobs() {
  static std::unordered_map<RedisModuleBlockedClient*, RagJob*> m;
  return m;
}

// CRC16-XMODEM of the key's hash tag, mod 16384: the cluster slot (7.0 has no ClusterKeySlot API).
unsigned key_slot(std::string_view key) {
  auto open = key.find('{');
  if (open != std::string_view::npos) {
    auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  uint16_t crc = 0;
  for (unsigned char c : key) {
    crc ^= static_cast<uint16_t>(c << 8);
    for (int b = 0; b < 8; ++b) crc = static_cast<uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc & 16383;
}

void unblock(RagJob* job) {
  rm::BlockedClientMeasureTimeEnd(job->bc);
  rm::UnblockClient(job->bc, job);
}

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
          job->error_code = "NOPERM";
          err = "no permission to read document key '" + key + "'";
        } else if (cluster && key_slot(key) != slot) {
          job->error_code = "CROSSSLOT";
          err = "document key '" + key + "' is in another hash slot than the vector set (use a {hash tag})";
        } else {
          std::vector<int32_t> ids;
          KeyError ke = read_token_key(ctx, kname, tok, &ids);
          if (ke) {
            job->error_code = ke.code;
            err = ke.message;
          } else {
            docs.push_back(std::move(ids));
            job->sources.push_back({*h.name, h.score, key});
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
  tokenizer::EncodeOptions no_special;
  no_special.add_special = false;
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
  if (job->cancelled) return unblock(job);
  if (!retrieve_and_assemble(ctx, job)) return unblock(job);
  engine::Callbacks cb;
  cb.on_done = [job](engine::Result&& r) {
    job->result = std::move(r);  // engine thread; the job belongs to the main thread after unblock
    unblock(job);
  };
  job->generating = true;
  auto submitted = job->model->engine->submit(std::move(job->gen), std::move(cb));
  if (auto* refusal = std::get_if<engine::SubmitError>(&submitted)) {
    if (refusal->kind == engine::SubmitError::Kind::Busy) {
      ++stats().busy_replies;
      job->error_code = "BUSY";
      job->error = refusal->message + "; retry in " + std::to_string(refusal->retry_after_ms) + " ms";
    } else {
      job->error = refusal->message;
    }
    return unblock(job);
  }
  job->handle = std::get<engine::Handle>(submitted);
  ++stats().generate_requests;
}

// Main thread (event-loop one-shot) after the query embedding is done.
void after_embedding(void* data) {
  auto* job = static_cast<RagJob*>(data);
  try {
    if (job->result.finish != engine::FinishReason::Stop || job->result.embedding.empty()) {
      job->error = job->result.finish == engine::FinishReason::Error ? "query embedding failed: " + job->result.error
                                                                    : "query embedding did not finish";
      return unblock(job);
    }
    job->query = std::move(job->result.embedding);
    job->result = engine::Result{};
    // A context bound to the blocked client reads keys in the client's database.
    RedisModuleCtx* ctx = rm::GetThreadSafeContext(job->bc);
    retrieve_and_generate(ctx, job);
    rm::FreeThreadSafeContext(ctx);
  } catch (const std::exception& e) {
    job->error = std::string("internal error: ") + e.what();
    unblock(job);
  }
}

int on_reply(RedisModuleCtx* ctx, RedisModuleString**, int) {
  MainThreadTimer timer("infer.rag reply");
  try {
    auto* job = static_cast<RagJob*>(rm::GetBlockedClientPrivateData(ctx));
    if (!job->error.empty()) return reply_coded_error(ctx, job->error_code, job->error);
    const engine::Result& r = job->result;
    if (r.finish == engine::FinishReason::Error) return reply_error(ctx, "generation failed: " + r.error);
    if (r.finish == engine::FinishReason::Deadline)
      return reply_coded_error(ctx, "TIMEOUT", "generation did not finish within " + std::to_string(job->timeout_ms) + " ms");
    if (r.finish == engine::FinishReason::Cancelled) return reply_error(ctx, "generation cancelled");
    if (!job->with_sources) return rm::ReplyWithStringBuffer(ctx, r.text.data(), r.text.size());
    rm::ReplyWithMap(ctx, 3);
    rm::ReplyWithCString(ctx, "text");
    rm::ReplyWithStringBuffer(ctx, r.text.data(), r.text.size());
    rm::ReplyWithCString(ctx, "sources");
    rm::ReplyWithArray(ctx, static_cast<long>(job->sources.size()));
    for (const auto& s : job->sources) {
      rm::ReplyWithArray(ctx, 3);
      rm::ReplyWithStringBuffer(ctx, s.element.data(), s.element.size());
      rm::ReplyWithDouble(ctx, s.score);
      rm::ReplyWithStringBuffer(ctx, s.key.data(), s.key.size());
    }
    rm::ReplyWithCString(ctx, "prompt_tokens");
    return rm::ReplyWithLongLong(ctx, static_cast<long long>(job->prompt_tokens));
  } catch (...) {
    return reply_error(ctx, "internal error while replying");
  }
}

void cancel(RagJob* job) {
  job->cancelled = true;
  job->handle.cancel();
}

int on_timeout(RedisModuleCtx* ctx, RedisModuleString**, int) {
  auto it = live_jobs().find(rm::GetBlockedClientHandle(ctx));
  long long ms = 0;
  if (it != live_jobs().end()) {
    cancel(it->second);
    ms = it->second->timeout_ms;
  }
  ++stats().timeouts;
  return reply_coded_error(ctx, "TIMEOUT", "INFER.RAG did not finish within " + std::to_string(ms) + " ms");
}

void on_disconnect(RedisModuleCtx*, RedisModuleBlockedClient* bc) {
  auto it = live_jobs().find(bc);
  if (it != live_jobs().end()) cancel(it->second);
  ++stats().disconnects;
}

void free_job(RedisModuleCtx*, void* privdata) {
  auto* job = static_cast<RagJob*>(privdata);
  live_jobs().erase(job->bc);
  if (job->vset) rm::FreeString(nullptr, job->vset);
  if (job->user) rm::FreeString(nullptr, job->user);
  delete job;
}

// Generation options shared with INFER.GENERATE's grammar; returns false with err set.
bool parse_generation_option(RedisModuleString** argv, int argc, int* i, engine::Request* req, long long* timeout_ms,
                             std::string* err, bool* matched) {
  const Settings& s = settings();
  RedisModuleString* w = argv[*i];
  *matched = true;
  if (*i + 1 >= argc) {
    *matched = false;
    return true;
  }
  RedisModuleString* v = argv[*i + 1];
  long long n = 0;
  double d = 0;
  if (is_word(w, "MAXTOKENS")) {
    if (!parse_int(v, 1, s.max_tokens, "MAXTOKENS", &n, err)) return false;
    req->max_tokens = static_cast<int>(n);
  } else if (is_word(w, "TEMP")) {
    if (!parse_real(v, 0, 100, "TEMP", &d, err)) return false;
    req->sampling.temperature = static_cast<float>(d);
  } else if (is_word(w, "TOPK")) {
    if (!parse_int(v, 0, 1 << 24, "TOPK", &n, err)) return false;
    req->sampling.top_k = static_cast<int>(n);
  } else if (is_word(w, "TOPP")) {
    if (!parse_real(v, 0, 1, "TOPP", &d, err)) return false;
    req->sampling.top_p = static_cast<float>(d);
  } else if (is_word(w, "MINP")) {
    if (!parse_real(v, 0, 1, "MINP", &d, err)) return false;
    req->sampling.min_p = static_cast<float>(d);
  } else if (is_word(w, "REPEAT-PENALTY")) {
    if (!parse_real(v, 0, 100, "REPEAT-PENALTY", &d, err)) return false;
    req->sampling.repeat_penalty = static_cast<float>(d);
  } else if (is_word(w, "SEED")) {
    if (!parse_int(v, 0, LLONG_MAX, "SEED", &n, err)) return false;
    req->sampling.seed = static_cast<uint64_t>(n);
  } else if (is_word(w, "STOP")) {
    if (view(v).empty()) return *err = "STOP string must not be empty", false;
    if (req->stop.size() >= 16) return *err = "at most 16 STOP strings", false;
    req->stop.push_back(str(v));
  } else if (is_word(w, "TIMEOUT")) {
    if (!parse_int(v, 0, 86400000, "TIMEOUT", timeout_ms, err)) return false;
  } else {
    *matched = false;
    return true;
  }
  ++*i;
  return true;
}

}  // namespace

int cmd_rag(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 5) return rm::WrongArity(ctx);
  auto job = std::make_unique<RagJob>();
  job->gen.max_tokens = static_cast<int>(settings().default_max_tokens);
  job->timeout_ms = settings().timeout_ms;
  job->search.count = 3;  // a few documents by default
  std::string err;
  std::optional<std::string> query_text;
  std::optional<std::string> template_name;
  int i = 3;
  if (is_word(argv[i], "QUERY")) {
    query_text = str(argv[i + 1]);
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
    bool matched = false;
    if (is_word(w, "WITHSOURCES")) {
      job->with_sources = true;
    } else if (is_word(w, "QUESTION") && has_value) {
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
    } else if (is_word(w, "DOCKEY") && has_value) {
      job->dockey = str(argv[++i]);
    } else if (is_word(w, "TEMPLATE") && has_value) {
      template_name = str(argv[++i]);
      if (template_name != "plain" && template_name != "chat") return reply_error(ctx, "TEMPLATE must be plain or chat");
    } else if (!parse_generation_option(argv, argc, &i, &job->gen, &job->timeout_ms, &err, &matched)) {
      return reply_error(ctx, err);
    } else if (!matched) {
      return reply_error(ctx, "unknown option '" + str(w) + "'");
    }
  }
  if (job->filter) job->search.filter = &*job->filter;
  if (query_text && !question_given) job->question = *query_text;
  if (!query_text && !question_given) return reply_error(ctx, "a vector query needs QUESTION text");

  job->model = models().find(view(argv[1]));
  if (!job->model) return reply_error(ctx, "unknown model '" + str(argv[1]) + "' (see INFER.MODELS)");
  const tokenizer::Tokenizer& tok = job->model->engine->tokenizer();
  job->chat = template_name ? *template_name == "chat" : !tok.chat_template().empty();
  {
    VsetKey k(ctx, argv[2], REDISMODULE_READ);
    if (k.wrong_type) return rm::ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    const uint32_t want = query_text ? static_cast<uint32_t>(job->model->engine->n_embd())
                                     : static_cast<uint32_t>(job->query.size());
    if (k.set && k.set->config().dim != want)
      return reply_error(ctx, "vector dimension mismatch: the query has " + std::to_string(want) +
                                  " dimensions, the set " + std::to_string(k.set->config().dim));
  }
  if (refuse_if_cannot_block(ctx, "INFER.RAG")) return REDISMODULE_OK;

  if (job->timeout_ms > 0)
    job->gen.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(job->timeout_ms);
  job->vset = rm::CreateStringFromString(nullptr, argv[2]);
  job->user = rm::GetCurrentUserName(ctx);
  RagJob* j = job.release();  // owned by the blocked client from here: free_job deletes it
  j->bc = rm::BlockClient(ctx, on_reply, on_timeout, free_job, j->timeout_ms);
  rm::SetDisconnectCallback(j->bc, on_disconnect);
  rm::BlockedClientMeasureTimeStart(j->bc);
  live_jobs()[j->bc] = j;
  if (!query_text) {
    retrieve_and_generate(ctx, j);
    return REDISMODULE_OK;
  }
  submit_embedding(
      j->model, *query_text, j->gen.deadline,
      [j](engine::Handle h) {
        j->handle = std::move(h);
        if (j->cancelled) j->handle.cancel();
      },
      [j](const engine::SubmitError& refusal) {
        j->error_code = refusal.kind == engine::SubmitError::Kind::Busy ? "BUSY" : "ERR";
        j->error = refusal.message;
        unblock(j);
      },
      [j](engine::Result&& r) {
        // Engine thread: hand the rest to the main thread (retrieval must hold the lock).
        j->result = std::move(r);
        rm::EventLoopAddOneShot(after_embedding, j);
      });
  return REDISMODULE_OK;
}

}  // namespace infer::redis
