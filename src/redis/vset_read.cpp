// INFER.VSIM, INFER.VEMB, INFER.VCARD, INFER.VDIM, INFER.VINFO, INFER.VGETATTR: the reads of vector sets.
// VSIM runs synchronously on the main thread (simple; no locking of sets against concurrent writers).
// Its cost grows with EF and FILTER-EF, and TRUTH scans the whole set: large values stall the server
// for that long (bench/bench_vector.cpp and scripts/vector_bench.sh measure it). NOTHREAD is accepted.
#include <cstring>

#include "redis/args.h"
#include "redis/vset_handlers.h"
#include "redis/vset_type.h"

namespace infer::redis {

namespace {

int reply_wrongtype(RedisModuleCtx* ctx) { return rm::ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE); }

int reply_attrs(RedisModuleCtx* ctx, const std::string& attrs) {
  return attrs.empty() ? rm::ReplyWithNull(ctx) : rm::ReplyWithStringBuffer(ctx, attrs.data(), attrs.size());
}

}  // namespace

// INFER.VSIM key (ELE e | FP32 blob | VALUES n v...) [WITHSCORES] [WITHATTRIBS] [COUNT n] [EPSILON d] [EF n]
//            [FILTER expr] [FILTER-EF n] [TRUTH] [NOTHREAD]
// RESP2: flat array of element[, score][, attributes]. RESP3 with WITHSCORES or WITHATTRIBS: a map from
// element to its score, its attributes, or [score, attributes] when both are asked for.
int cmd_vsim(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 4) return rm::WrongArity(ctx);
  int i = 2;
  std::string err;
  std::optional<std::vector<float>> query;
  RedisModuleString* element = nullptr;
  if (is_word(argv[i], "ELE")) {
    element = argv[i + 1];
    i += 2;
  } else {
    query = parse_vector(argv, argc, &i, &err);
    if (!query) return reply_error(ctx, err);
  }
  vector::SearchOptions opt;
  std::optional<vector::Filter> filter;
  VsimReplyOptions ro;
  if (!parse_search_options(argv, argc, i, &opt, &filter, &ro, &err)) return reply_error(ctx, err);

  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (!k.set) return rm::ReplyWithEmptyArray(ctx);
  std::vector<vector::SearchHit> hits;
  try {
    hits = element ? k.set->search_element(view(element), opt) : k.set->search(*query, opt);
  } catch (const vector::VectorSetError& e) {
    return reply_error(ctx, e.what());
  }
  const bool resp3 = rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_RESP3;
  const long per_hit = 1 + (ro.with_scores ? 1 : 0) + (ro.with_attribs ? 1 : 0);
  if (resp3 && per_hit > 1) {
    rm::ReplyWithMap(ctx, static_cast<long>(hits.size()));
    for (const auto& h : hits) {
      rm::ReplyWithStringBuffer(ctx, h.name->data(), h.name->size());
      if (per_hit == 3) rm::ReplyWithArray(ctx, 2);
      if (ro.with_scores) rm::ReplyWithDouble(ctx, h.score);
      if (ro.with_attribs) reply_attrs(ctx, *h.attrs);
    }
    return REDISMODULE_OK;
  }
  rm::ReplyWithArray(ctx, static_cast<long>(hits.size()) * per_hit);
  for (const auto& h : hits) {
    rm::ReplyWithStringBuffer(ctx, h.name->data(), h.name->size());
    if (ro.with_scores) rm::ReplyWithDouble(ctx, h.score);
    if (ro.with_attribs) reply_attrs(ctx, *h.attrs);
  }
  return REDISMODULE_OK;
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
  auto a = k.set->attributes(view(argv[2]));
  return reply_attrs(ctx, a ? *a : std::string());
}

}  // namespace infer::redis
