// INFER.VSIM, INFER.VEMB, INFER.VCARD, INFER.VDIM, INFER.VINFO, INFER.VGETATTR: the reads of vector sets
// (the member and graph reads are in vset_members.cpp).
// VSIM on a set of at least infer.vsim-thread-threshold elements, or with a FILTER whose work is expected
// to take more than a few milliseconds, runs off the main thread (spec §3.1):
// the handler parses, blocks the client and queues the search with a reference to the set
// (vset_threads.h); the search thread reads under the set's read lock, copies the hits out and unblocks;
// the reply callback replies on the main thread. Inside MULTI, Lua, or with NOTHREAD it runs here,
// synchronously, as it does for small sets, under a filter work limit of ~4 ms (vector_set.h). Both paths
// run the same search and give the same reply.
#include <cstring>
#include <memory>
#include <string_view>

#include "redis/args.h"
#include "redis/blocked_call.h"
#include "redis/settings.h"
#include "redis/vset_handlers.h"
#include "redis/vset_threads.h"
#include "redis/vset_type.h"

namespace infer::redis {

namespace {


int reply_attrs(RedisModuleCtx* ctx, std::string_view attrs) {
  return attrs.empty() ? rm::ReplyWithNull(ctx) : rm::ReplyWithStringBuffer(ctx, attrs.data(), attrs.size());
}

struct HitView {
  std::string_view name;
  float score;
  std::string_view attrs;
};

// RESP2: flat array of element[, score][, attributes]. RESP3 with WITHSCORES or WITHATTRIBS: a map from
// element to its score, its attributes, or [score, attributes] when both are asked for.
int reply_hits(RedisModuleCtx* ctx, const std::vector<HitView>& hits, const VsimReplyOptions& ro) {
  const bool resp3 = rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_RESP3;
  const long per_hit = 1 + (ro.with_scores ? 1 : 0) + (ro.with_attribs ? 1 : 0);
  if (resp3 && per_hit > 1) {
    rm::ReplyWithMap(ctx, static_cast<long>(hits.size()));
    for (const auto& h : hits) {
      rm::ReplyWithStringBuffer(ctx, h.name.data(), h.name.size());
      if (per_hit == 3) rm::ReplyWithArray(ctx, 2);
      if (ro.with_scores) rm::ReplyWithDouble(ctx, h.score);
      if (ro.with_attribs) reply_attrs(ctx, h.attrs);
    }
    return REDISMODULE_OK;
  }
  rm::ReplyWithArray(ctx, static_cast<long>(hits.size()) * per_hit);
  for (const auto& h : hits) {
    rm::ReplyWithStringBuffer(ctx, h.name.data(), h.name.size());
    if (ro.with_scores) rm::ReplyWithDouble(ctx, h.score);
    if (ro.with_attribs) reply_attrs(ctx, h.attrs);
  }
  return REDISMODULE_OK;
}

// One VSIM request: what the handler parsed, and what the search found (copied out of the set, whose
// strings may change once the read lock is released).
struct VsimJob : BlockedJob {
  VsimJob() : BlockedJob("infer.vsim", "search") {}
  int reply(RedisModuleCtx* ctx) override { return reply_hits_or_error(ctx); }

  std::optional<std::vector<float>> query;
  std::string element;  // ELE: the element whose vector is the query
  vector::SearchOptions opt;
  std::optional<vector::Filter> filter;
  VsimReplyOptions ro;

  VsetRef set;                                          // threaded: keeps the set alive
  std::vector<std::pair<std::string, std::string>> names_attrs;
  std::vector<float> scores;
  std::string error;                                    // set when the search failed
  bool over_work_limit = false;                         // ... because the filter's work passed its limit

  // Runs on a search thread under the set's read lock, or on the main thread.
  void search(const vector::VectorSet& s) {
    opt.filter = filter ? &*filter : nullptr;  // the job may have moved since parsing
    try {
      const auto hits = query ? s.search(*query, opt) : s.search_element(element, opt);
      for (const auto& h : hits) {
        names_attrs.emplace_back(*h.name, ro.with_attribs ? *h.attrs : std::string());
        scores.push_back(h.score);
      }
    } catch (const vector::FilterWorkError& e) {
      error = e.what();
      over_work_limit = true;
    } catch (const vector::VectorSetError& e) {
      error = e.what();
    }
  }
  void clear_results() {
    names_attrs.clear();
    scores.clear();
    error.clear();
    over_work_limit = false;
  }
  int reply_hits_or_error(RedisModuleCtx* ctx) const {
    if (!error.empty()) return reply_error(ctx, error);
    std::vector<HitView> views;
    views.reserve(scores.size());
    for (size_t i = 0; i < scores.size(); ++i) views.push_back({names_attrs[i].first, scores[i], names_attrs[i].second});
    return reply_hits(ctx, views, ro);
  }
};

// Blocks the client and queues the search for a search thread, with the larger filter work limit.
// Returns false, with `job` the caller's again, when the queue is full.
bool search_on_thread(RedisModuleCtx* ctx, std::unique_ptr<VsimJob>& job, const VsetRef& set) {
  job->set = set;
  job->opt.filter_work_limit = kThreadedFilterWorkLimit;
  auto* blocked = static_cast<VsimJob*>(block_client(ctx, std::move(job)));  // owned by the client now
  auto task = [blocked] {
    if (!blocked->cancellation->requested()) {
      auto lock = blocked->set->read();
      blocked->search(blocked->set->set());
    }
    blocked->set.reset();  // the search is done: a DEL may free the set now
    complete(blocked);
  };
  if (run_search_thread(task)) return true;
  job.reset(static_cast<VsimJob*>(abort_blocked(blocked).release()));  // queue full: search here instead
  job->set.reset();
  job->opt.filter_work_limit = vector::kFilterWorkLimit;
  return false;
}

// True when this call may block the client: not in MULTI, Lua or a module's RM_Call.
bool can_block(RedisModuleCtx* ctx) {
  const int flags = rm::GetContextFlags(ctx);
  return !(flags & (REDISMODULE_CTX_FLAGS_MULTI | REDISMODULE_CTX_FLAGS_LUA | REDISMODULE_CTX_FLAGS_DENY_BLOCKING));
}

// INFER.VSIM key (ELE e | FP32 blob | VALUES n v...) [WITHSCORES] [WITHATTRIBS] [COUNT n] [EPSILON d] [EF n]
//            [FILTER expr] [FILTER-EF n] [TRUTH] [NOTHREAD]
struct VsimArgs {
  RedisModuleString* element = nullptr;  // ELE's
  std::optional<std::vector<float>> query;
  vector::SearchOptions opt;
  std::optional<vector::Filter> filter;
  VsimReplyOptions ro;
  bool nothread = false;
};

// Parses argv without touching the keyspace or the settings.
bool parse(RedisModuleString** argv, int argc, VsimArgs* a, std::string* err) {
  int i = 2;
  if (is_word(argv[i], "ELE")) {
    a->element = argv[i + 1];  // argc >= 4
    i += 2;
  } else {
    a->query = parse_vector(argv, argc, &i, err);
    if (!a->query) return false;
  }
  if (!parse_search_options(argv, argc, i, &a->opt, &a->filter, &a->ro, err)) return false;
  for (int j = i; j < argc; ++j) a->nothread = a->nothread || is_word(argv[j], "NOTHREAD");
  return true;
}

}  // namespace

int cmd_vsim(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 4) return rm::WrongArity(ctx);
  VsimArgs a;
  std::string err;
  if (!parse(argv, argc, &a, &err)) return reply_error(ctx, err);
  if (a.element) {
    if (std::string e = element_name_error(ctx, a.element); !e.empty()) return reply_error(ctx, e);
  }
  auto job = std::make_unique<VsimJob>();
  if (a.element) job->element = str(a.element);
  job->query = std::move(a.query);
  job->opt = a.opt;
  job->filter = std::move(a.filter);
  job->ro = a.ro;
  const bool nothread = a.nothread;

  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (!k.set) return rm::ReplyWithEmptyArray(ctx);
  const bool may_block = !nothread && can_block(ctx);
  // A large set, or a FILTER or vector comparisons expected to take more than half the main thread's
  // share, goes to the search threads; where it cannot, a search past the whole share is refused.
  const uint64_t search_bytes = k.set->estimated_search_bytes(job->opt);
  const bool costly = k.set->size() >= static_cast<size_t>(settings().vsim_thread_threshold) ||
                      k.set->estimated_filter_work(job->opt) > vector::kFilterWorkLimit / 2 ||
                      search_bytes > vector::kMainThreadSearchBytes / 2;
  const bool tried_thread = may_block && costly;
  if (tried_thread && search_on_thread(ctx, job, k.shared)) return REDISMODULE_OK;
  if (search_bytes > vector::kMainThreadSearchBytes) {
    if (tried_thread) return reply_coded_error(ctx, "BUSY", "the search threads' queue is full; retry later");
    return reply_error(ctx, vector::main_thread_search_error(search_bytes) +
                                " (inside MULTI, a script or with NOTHREAD); lower EF, COUNT or FILTER-EF, drop "
                                "TRUTH, or run it outside MULTI and scripts");
  }
  // Synchronous: the main thread holds the global lock and writers run only here, so no set lock.
  job->search(*k.set);
  if (job->over_work_limit && may_block && !tried_thread) {
    // The estimate uses the mean attribute size; a few large attributes can defeat it. Try again where
    // a search may take longer.
    const std::string error = job->error;
    job->clear_results();
    if (search_on_thread(ctx, job, k.shared)) return REDISMODULE_OK;
    job->error = error;  // the queue is full: the main thread's limit stands
  }
  return job->reply(ctx);
}

// INFER.VEMB key element [RAW]: the vector as added (up to quantisation), or null. RAW: [quantisation,
// stored bytes, L2 norm] plus the Q8 range.
int cmd_vemb(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 3 && argc != 4) return rm::WrongArity(ctx);
  const bool raw = argc == 4;
  if (raw && !is_word(argv[3], "RAW")) return reply_error(ctx, "syntax error at '" + str(argv[3]) + "'");
  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (!k.set) return rm::ReplyWithNull(ctx);
  if (raw) {
    if (std::string e = element_name_error(ctx, argv[2]); !e.empty()) return reply_error(ctx, e);
    auto r = k.set->raw(view(argv[2]));
    if (!r) return rm::ReplyWithNull(ctx);
    const bool q8 = r->quant == vector::Quant::Q8;
    rm::ReplyWithArray(ctx, q8 ? 4 : 3);
    rm::ReplyWithCString(ctx, vector::quant_raw_name(r->quant));
    rm::ReplyWithStringBuffer(ctx, r->bytes.data(), r->bytes.size());
    rm::ReplyWithDouble(ctx, r->norm);
    if (q8) rm::ReplyWithDouble(ctx, r->range);
    return REDISMODULE_OK;
  }
  if (std::string e = element_name_error(ctx, argv[2]); !e.empty()) return reply_error(ctx, e);
  auto v = k.set->embedding(view(argv[2]));
  if (!v) return rm::ReplyWithNull(ctx);
  rm::ReplyWithArray(ctx, static_cast<long>(v->size()));
  for (float x : *v) rm::ReplyWithDouble(ctx, x);
  return REDISMODULE_OK;
}

// INFER.VCARD key: element count, 0 for a missing key.
int cmd_vcard(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 2) return rm::WrongArity(ctx);
  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  return rm::ReplyWithLongLong(ctx, k.set ? static_cast<long long>(k.set->size()) : 0);
}

// INFER.VDIM key: the vector dimension; an error for a missing key.
int cmd_vdim(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 2) return rm::WrongArity(ctx);
  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (!k.set) return reply_error(ctx, "key does not exist");
  return rm::ReplyWithLongLong(ctx, k.set->config().dim);
}

// INFER.VINFO key: a map of the set's parameters, null for a missing key.
int cmd_vinfo(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 2) return rm::WrongArity(ctx);
  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (!k.set) return rm::ReplyWithNullArray(ctx);
  const auto& s = *k.set;
  rm::ReplyWithMap(ctx, 8);
  rm::ReplyWithCString(ctx, "quant-type");
  rm::ReplyWithCString(ctx, vector::quant_name(s.config().quant));
  rm::ReplyWithCString(ctx, "hnsw-m");
  rm::ReplyWithLongLong(ctx, s.config().m);
  rm::ReplyWithCString(ctx, "vector-dim");
  rm::ReplyWithLongLong(ctx, s.config().dim);
  rm::ReplyWithCString(ctx, "projection-input-dim");
  rm::ReplyWithLongLong(ctx, s.config().projection_input_dim);
  rm::ReplyWithCString(ctx, "size");
  rm::ReplyWithLongLong(ctx, static_cast<long long>(s.size()));
  rm::ReplyWithCString(ctx, "max-level");
  rm::ReplyWithLongLong(ctx, s.max_level());
  rm::ReplyWithCString(ctx, "attributes-count");
  rm::ReplyWithLongLong(ctx, static_cast<long long>(s.attributes_count()));
  rm::ReplyWithCString(ctx, "hnsw-max-node-uid");
  rm::ReplyWithLongLong(ctx, s.max_node_id());
  return REDISMODULE_OK;
}

// INFER.VGETATTR key element: the JSON attributes, or null.
int cmd_vgetattr(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 3) return rm::WrongArity(ctx);
  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (!k.set) return rm::ReplyWithNull(ctx);
  if (std::string e = element_name_error(ctx, argv[2]); !e.empty()) return reply_error(ctx, e);
  auto a = k.set->attributes(view(argv[2]));
  return reply_attrs(ctx, a ? *a : std::string());
}

}  // namespace infer::redis
