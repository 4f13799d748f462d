// INFER.VADD, INFER.VREM, INFER.VSETATTR: the writes to vector sets. Each is replicated verbatim when it
// changed the set (inserts are deterministic: replicas build the same graph, spec §4.3).
#include <memory>

#include "redis/args.h"
#include "redis/settings.h"
#include "redis/vset_handlers.h"
#include "redis/vset_type.h"

namespace infer::redis {

namespace {
// A replica applies what its master (or the AOF) did, whatever its own limits.
bool from_master_or_aof(RedisModuleCtx* ctx) {
  return rm::GetContextFlags(ctx) & (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING);
}
}  // namespace

std::string element_name_error(RedisModuleCtx* ctx, const RedisModuleString* name) {
  const size_t bytes = view(name).size();
  if (bytes <= kMaxNameBytes || from_master_or_aof(ctx)) return "";
  return "element name of " + std::to_string(bytes) + " bytes is longer than " + std::to_string(kMaxNameBytes);
}

std::string attribute_size_error(RedisModuleCtx* ctx, size_t bytes) {
  const auto limit = static_cast<size_t>(settings().max_attribute_bytes);
  if (bytes <= limit || from_master_or_aof(ctx)) return "";
  return "attributes of " + std::to_string(bytes) + " bytes exceed infer.max-attribute-bytes (" +
         std::to_string(limit) + ")";
}

// INFER.VADD key [REDUCE dim] (FP32 blob | VALUES n v...) element [CAS] [NOQUANT|Q8|BIN] [EF n]
//            [SETATTR json] [M n] [REDUCED-FROM n]
// REDUCE creates the set with a random projection (vector/projection.h); later VADDs and VSIMs pass
// full-size vectors. REDUCED-FROM n (what AOF rewrite emits) adds a vector that is already reduced to a
// set that projects from n dimensions.
namespace {
struct VaddArgs {
  std::optional<uint32_t> reduce, reduced_from;
  std::vector<float> vec;
  int element_index = 0;
  RedisModuleString* element = nullptr;
  std::optional<vector::Quant> quant;
  std::optional<uint32_t> m, ef;
  RedisModuleString* attrs = nullptr;  // SETATTR's json
  bool cas = false;
};

// Parses argv without touching the keyspace or the settings.
bool parse(RedisModuleString** argv, int argc, VaddArgs* a, std::string* err) {
  int i = 2;
  long long n = 0;
  if (is_word(argv[i], "REDUCE")) {
    if (i + 1 >= argc || !parse_int(argv[i + 1], 1, 65536, "REDUCE", &n, err)) {
      if (err->empty()) *err = needs_value("REDUCE", "a dimension");
      return false;
    }
    a->reduce = static_cast<uint32_t>(n);
    i += 2;
    if (i >= argc || !is_vector_start(argv[i]))
      return *err = "REDUCE must come immediately before the vector (FP32 or VALUES)", false;
  }
  auto vec = parse_vector(argv, argc, &i, err);
  if (!vec) return false;
  a->vec = std::move(*vec);
  if (i >= argc) return *err = "missing element name after the vector", false;
  a->element_index = i;
  a->element = argv[i++];
  for (; i < argc; ++i) {
    RedisModuleString* w = argv[i];
    const bool has_value = i + 1 < argc;
    if (is_word(w, "CAS")) {
      a->cas = true;
    } else if (is_word(w, "NOQUANT") || is_word(w, "Q8") || is_word(w, "BIN")) {
      const auto q = is_word(w, "NOQUANT") ? vector::Quant::F32 : is_word(w, "Q8") ? vector::Quant::Q8 : vector::Quant::Bin;
      if (a->quant && *a->quant != q) return *err = "only one of NOQUANT, Q8 and BIN may be given", false;
      a->quant = q;
    } else if (is_word(w, "EF") && has_value) {
      if (!parse_int(argv[++i], 1, 1000000, "EF", &n, err)) return *err = "invalid EF: " + *err, false;
      a->ef = static_cast<uint32_t>(n);
    } else if (is_word(w, "M") && has_value) {
      if (!parse_int(argv[++i], 4, 4096, "M", &n, err)) return *err = "invalid M: " + *err, false;
      a->m = static_cast<uint32_t>(n);
    } else if (is_word(w, "SETATTR") && has_value) {
      a->attrs = argv[++i];
    } else if (is_word(w, "REDUCED-FROM") && has_value) {
      if (!parse_int(argv[++i], 1, 65536, "REDUCED-FROM", &n, err)) return false;
      a->reduced_from = static_cast<uint32_t>(n);
    } else {
      return *err = "invalid option after element: syntax error at '" + str(w) + "'", false;
    }
  }
  if (a->reduce && a->reduced_from) return *err = "REDUCE and REDUCED-FROM cannot be combined", false;
  return true;
}
}  // namespace

int cmd_vadd(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 4) return rm::WrongArity(ctx);
  VaddArgs a;
  std::string err;
  if (!parse(argv, argc, &a, &err)) return reply_error(ctx, err);
  if (std::string e = element_name_error(ctx, a.element); !e.empty()) return reply_error(ctx, e);
  std::optional<std::string> attrs;
  if (a.attrs) {
    if (std::string e = attribute_size_error(ctx, view(a.attrs).size()); !e.empty()) return reply_error(ctx, e);
    attrs = str(a.attrs);
  }
  const auto size = static_cast<uint32_t>(a.vec.size());

  VsetKey k(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
  if (k.wrong_type) return reply_wrongtype(ctx);
  bool added;
  try {
    if (!k.set) {
      vector::SetConfig cfg;
      cfg.dim = a.reduce.value_or(size);
      cfg.projection_input_dim = a.reduce ? size : a.reduced_from.value_or(0);
      cfg.quant = a.quant.value_or(vector::Quant::Q8);
      cfg.m = a.m.value_or(16);
      cfg.ef_construction = a.ef.value_or(200);
      // Build the first element before touching the key, so a bad request leaves nothing behind.
      auto fresh = std::make_unique<vector::VectorSet>(cfg);
      added = fresh->add(view(a.element), a.vec, attrs, 0, a.reduced_from.has_value());
      k.store(std::move(fresh));
    } else {
      const auto& cfg = k.set->config();
      if (a.quant && *a.quant != cfg.quant)
        return reply_error(ctx, "asked quantization mismatch with existing vector set");
      if (a.m && *a.m != cfg.m) return reply_error(ctx, "asked M value mismatch with existing vector set");
      if (a.reduce && !cfg.projection_input_dim)
        return reply_error(ctx, "cannot add projection to existing set without projection (the set was created "
                                "without REDUCE)");
      if (a.reduce && *a.reduce != cfg.dim)
        return reply_error(ctx, "projection dimension mismatch with existing set: it reduces to " +
                                    std::to_string(cfg.dim) + " dimensions, asked " + std::to_string(*a.reduce));
      if (a.reduced_from && *a.reduced_from != cfg.projection_input_dim)
        return reply_error(ctx, "REDUCED-FROM mismatch: the vector set projects from " +
                                    std::to_string(cfg.projection_input_dim) + " dimensions");
      const uint32_t want = a.reduced_from ? cfg.dim : k.set->input_dim();
      if (size != want) {  // Redis 8's wording, which clients match
        if (cfg.projection_input_dim && !a.reduced_from)
          return reply_error(ctx, "Input dimension mismatch for projection - got " + std::to_string(size) +
                                      " but projection expects " + std::to_string(want) + " (it reduces " +
                                      std::to_string(want) + "-dimensional vectors to " + std::to_string(cfg.dim) +
                                      ")");
        return reply_error(ctx, "Vector dimension mismatch - got " + std::to_string(size) + " but set has " +
                                    std::to_string(want));
      }
      // CAS searches off the main thread, for a new element of an existing set, where the client may
      // block (not in MULTI or scripts) and not from the master or the AOF, which insert in order.
      const int no_cas = REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING |
                         REDISMODULE_CTX_FLAGS_MULTI | REDISMODULE_CTX_FLAGS_LUA | REDISMODULE_CTX_FLAGS_DENY_BLOCKING;
      if (a.cas && !a.reduced_from && !(rm::GetContextFlags(ctx) & no_cas) && !k.set->contains(view(a.element)) &&
          start_cas_insert(ctx, argv, argc, a.element_index, k.shared, a.vec, attrs, a.ef.value_or(0)))
        return REDISMODULE_OK;
      added = k.set->add(view(a.element), a.vec, attrs, a.ef.value_or(0), a.reduced_from.has_value());
    }
  } catch (const vector::VectorSetError& e) {
    return reply_error(ctx, e.what());
  }
  rm::ReplicateVerbatim(ctx);
  rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "vadd", argv[1]);
  return rm::ReplyWithLongLong(ctx, added ? 1 : 0);
}

// INFER.VREM key element: 1 when removed; the key goes with its last element.
int cmd_vrem(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 3) return rm::WrongArity(ctx);
  VsetKey k(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (std::string e = element_name_error(ctx, argv[2]); !e.empty()) return reply_error(ctx, e);
  if (!k.set || !k.set->remove(view(argv[2]))) return rm::ReplyWithLongLong(ctx, 0);
  if (k.set->size() == 0) rm::DeleteKey(k.key);
  rm::ReplicateVerbatim(ctx);
  rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "vrem", argv[1]);
  return rm::ReplyWithLongLong(ctx, 1);
}

// INFER.VSETATTR key element json: 1 when set ("" removes the attributes), 0 when the element is absent.
int cmd_vsetattr(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 4) return rm::WrongArity(ctx);
  if (std::string e = attribute_size_error(ctx, view(argv[3]).size()); !e.empty()) return reply_error(ctx, e);
  if (std::string e = element_name_error(ctx, argv[2]); !e.empty()) return reply_error(ctx, e);
  VsetKey k(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
  if (k.wrong_type) return reply_wrongtype(ctx);
  bool done = false;
  try {
    done = k.set && k.set->set_attributes(view(argv[2]), str(argv[3]));
  } catch (const vector::VectorSetError& e) {
    return reply_error(ctx, e.what());
  }
  if (!done) return rm::ReplyWithLongLong(ctx, 0);
  rm::ReplicateVerbatim(ctx);
  rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "vsetattr", argv[1]);
  return rm::ReplyWithLongLong(ctx, 1);
}

}  // namespace infer::redis
