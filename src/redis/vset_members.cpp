// INFER.VISMEMBER, INFER.VRANDMEMBER, INFER.VRANGE, INFER.VLINKS: reads of a vector set's members and
// graph, with Redis 8's replies. They run on the main thread; a reply that would list more than
// kMaxReplyNames names (or kMaxReplyNameBytes of them) is refused before anything is written, so that no
// count can make one call allocate or write without bound.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "redis/args.h"
#include "redis/vset_handlers.h"
#include "redis/vset_type.h"
#include "vector/quant.h"

namespace infer::redis {

namespace {


std::mt19937_64& rng() {
  static std::mt19937_64 gen{std::random_device{}()};  // main thread only
  return gen;
}

// "" when `count` names of `bytes` in total fit one reply, else the refusal.
std::string reply_size_error(const char* command, uint64_t count, uint64_t bytes) {
  if (count > kMaxReplyNames)
    return std::string(command) + " would reply " + std::to_string(count) + " elements, more than the " +
           std::to_string(kMaxReplyNames) + " a reply may hold";
  if (bytes > kMaxReplyNameBytes)
    return std::string(command) + " would reply " + std::to_string(bytes) + " bytes of element names, more than the " +
           std::to_string(kMaxReplyNameBytes) + " a reply may hold";
  return "";
}

// Replies `names`, or refuses them (the refusal followed by `hint`) when they do not fit one reply.
int reply_names(RedisModuleCtx* ctx, const char* command, const std::vector<const std::string*>& names,
                const std::string& hint = "") {
  uint64_t bytes = 0;
  for (const std::string* name : names) bytes += name->size();
  if (std::string e = reply_size_error(command, names.size(), bytes); !e.empty()) return reply_error(ctx, e + hint);
  rm::ReplyWithArray(ctx, static_cast<long>(names.size()));
  for (const std::string* name : names) rm::ReplyWithStringBuffer(ctx, name->data(), name->size());
  return REDISMODULE_OK;
}

// One end of a VRANGE: `-`, `+`, `[name` (inclusive) or `(name` (exclusive). False when malformed.
bool parse_bound(std::string_view s, vector::VectorSet::RangeBound* b) {
  using Bound = vector::VectorSet::RangeBound;
  if (s == "-" || s == "+") {
    b->kind = s == "-" ? Bound::Min : Bound::Max;
    return true;
  }
  if (s.size() < 2 || (s[0] != '[' && s[0] != '(')) return false;
  b->kind = Bound::Name;
  b->inclusive = s[0] == '[';
  b->name = std::string(s.substr(1));
  return true;
}

}  // namespace

// INFER.VISMEMBER key element: 1 when the element is in the set (true in RESP3), else 0.
int cmd_vismember(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 3) return rm::WrongArity(ctx);
  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (std::string e = element_name_error(ctx, argv[2]); !e.empty()) return reply_error(ctx, e);
  return rm::ReplyWithBool(ctx, k.set && k.set->contains(view(argv[2])));
}

// INFER.VRANDMEMBER key [count]: without count one random element (nil for a missing key); a positive
// count that many distinct elements (at most the set), a negative one |count| elements that may repeat;
// 0 or a missing key with a count: an empty array.
int cmd_vrandmember(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 2 && argc != 3) return rm::WrongArity(ctx);
  const bool with_count = argc == 3;
  long long count = 1;
  if (with_count) {
    if (rm::StringToLongLong(argv[2], &count) != REDISMODULE_OK)
      return reply_error(ctx, "COUNT value is not an integer");
    if (count == 0) return rm::ReplyWithEmptyArray(ctx);
  }
  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (!k.set || k.set->size() == 0) return with_count ? rm::ReplyWithEmptyArray(ctx) : rm::ReplyWithNull(ctx);
  const vector::VectorSet& s = *k.set;
  if (!with_count) {
    const std::string* name = s.random_names(1, false, rng())[0];
    return rm::ReplyWithStringBuffer(ctx, name->data(), name->size());
  }
  const bool repeat = count < 0;
  // |LLONG_MIN| fits in uint64_t.
  uint64_t want = repeat ? 0 - static_cast<uint64_t>(count) : static_cast<uint64_t>(count);
  if (!repeat) want = std::min<uint64_t>(want, s.size());
  if (std::string e = reply_size_error("VRANDMEMBER", want, 0); !e.empty()) return reply_error(ctx, e);
  return reply_names(ctx, "VRANDMEMBER", s.random_names(static_cast<size_t>(want), repeat, rng()));
}

// INFER.VRANGE key start end [count]: element names from start to end in byte order; start and end are
// `[name` (inclusive), `(name` (exclusive), `-` (the first, start only) or `+` (the last, end only). A
// negative or absent count means all. The set keeps its names ordered, so the cost is O(log N + count).
int cmd_vrange(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 4 && argc != 5) return rm::WrongArity(ctx);
  long long count = -1;
  if (argc == 5 && rm::StringToLongLong(argv[4], &count) != REDISMODULE_OK)
    return reply_error(ctx, "invalid COUNT value");
  vector::VectorSet::RangeBound start, end;
  if (!parse_bound(view(argv[2]), &start)) return reply_error(ctx, "invalid start range format");
  if (!parse_bound(view(argv[3]), &end)) return reply_error(ctx, "invalid end range format");
  if (start.kind == vector::VectorSet::RangeBound::Max || end.kind == vector::VectorSet::RangeBound::Min)
    return reply_error(ctx, "'-' can only be used as first argument, '+' only as second");
  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (!k.set || count == 0) return rm::ReplyWithEmptyArray(ctx);
  // One past the reply limit tells a range that is too long from one that fits.
  const uint64_t want = count < 0 ? UINT64_MAX : static_cast<uint64_t>(count);
  return reply_names(ctx, "VRANGE",
                     k.set->range(start, end, static_cast<size_t>(std::min<uint64_t>(want, kMaxReplyNames + 1))),
                     "; give a COUNT and continue from the last element with '('");
}

// INFER.VLINKS key element [WITHSCORES]: the element's neighbours on each of its HNSW levels, highest
// first: one array per level, or with WITHSCORES one map per level from neighbour to similarity (a flat
// name, score array in RESP2). Nil for a missing key or element.
int cmd_vlinks(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc != 3 && argc != 4) return rm::WrongArity(ctx);
  if (argc == 4 && !is_word(argv[3], "WITHSCORES")) return rm::WrongArity(ctx);
  const bool with_scores = argc == 4;
  VsetKey k(ctx, argv[1], REDISMODULE_READ);
  if (k.wrong_type) return reply_wrongtype(ctx);
  if (!k.set) return rm::ReplyWithNull(ctx);
  if (std::string e = element_name_error(ctx, argv[2]); !e.empty()) return reply_error(ctx, e);
  const vector::VectorSet& s = *k.set;
  auto levels = s.neighbours(view(argv[2]), /*with_scores=*/false);
  if (!levels) return rm::ReplyWithNull(ctx);
  uint64_t total = 0, bytes = 0;
  for (const auto& level : *levels) {
    total += level.size();
    for (const auto& l : level) bytes += l.first->size();
  }
  if (std::string e = reply_size_error("VLINKS", total, bytes); !e.empty()) return reply_error(ctx, e);
  if (with_scores) {
    // Scores compare the element's vector with each neighbour's: bounded as a search's comparisons are.
    const uint64_t compared = total * vector::encoded_size(s.config().quant, s.config().dim);
    if (compared > vector::kMainThreadSearchBytes)
      return reply_error(ctx, vector::main_thread_search_error(compared) + "; ask VLINKS without WITHSCORES");
    levels = s.neighbours(view(argv[2]), /*with_scores=*/true);
  }
  // Redis 8's order: the element's highest level first, level 0 last.
  rm::ReplyWithArray(ctx, static_cast<long>(levels->size()));
  for (auto level = levels->rbegin(); level != levels->rend(); ++level) {
    if (with_scores)
      rm::ReplyWithMap(ctx, static_cast<long>(level->size()));  // RESP2: name, score pairs
    else
      rm::ReplyWithArray(ctx, static_cast<long>(level->size()));
    for (const auto& [name, score] : *level) {
      rm::ReplyWithStringBuffer(ctx, name->data(), name->size());
      if (with_scores) rm::ReplyWithDouble(ctx, score);
    }
  }
  return REDISMODULE_OK;
}

}  // namespace infer::redis
