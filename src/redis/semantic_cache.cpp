// The semantic cache (semantic_cache.h): CACHE's options, the lookup, the store and the expiry sweep.
//
// An entry is an element of the cache's vector set named "<fingerprint>:<hash of its vector>", whose
// attributes are written by cache_store as {"fp":"<16 hex>","exp":<unix ms, 0: never>, ...answer}: the
// lookup tests an element's fingerprint and expiry from that fixed start without parsing the JSON.
#include "redis/semantic_cache.h"

#include <sys/stat.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>

#include "redis/args.h"
#include "redis/cluster_slots.h"
#include "redis/generation_job.h"
#include "redis/settings.h"
#include "redis/stats.h"
#include "redis/vset_threads.h"
#include "redis/write_queue.h"

namespace infer::redis {
namespace {

constexpr std::string_view kEntryStart = R"({"fp":")";
constexpr std::string_view kExpField = R"(","exp":)";
constexpr size_t kFingerprintHexDigits = 16;
// The sweep remembers at most this many cache keys (those this node stored into or looked up).
constexpr size_t kMaxSweptKeys = 4096;

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An entry's expiry (0: never) and fingerprint, read from its attributes' fixed start; nullopt when the
// attributes are not a cache entry's.
std::optional<long long> entry_expiry(std::string_view attrs, std::string_view* fingerprint) {
  if (attrs.size() < kEntryStart.size() + kFingerprintHexDigits + kExpField.size() ||
      attrs.substr(0, kEntryStart.size()) != kEntryStart)
    return std::nullopt;
  *fingerprint = attrs.substr(kEntryStart.size(), kFingerprintHexDigits);
  std::string_view rest = attrs.substr(kEntryStart.size() + kFingerprintHexDigits);
  if (rest.substr(0, kExpField.size()) != kExpField) return std::nullopt;
  rest.remove_prefix(kExpField.size());
  long long exp = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), exp);
  if (ec != std::errc()) return std::nullopt;
  return exp;
}

bool expired_at(long long exp, long long now) { return exp > 0 && exp <= now; }

std::string hex64(uint64_t h) {
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The sweep's cache keys, with where it stopped in each. Main thread.
struct SweptKey {
  int db;
  std::string key;
  uint32_t cursor = 0;
};
std::vector<SweptKey>& swept_keys() {
  static auto* keys = new std::vector<SweptKey>;
  return *keys;
}
size_t g_next_swept = 0;

void remember_cache_key(int db, std::string_view key) {
  auto& keys = swept_keys();
  for (const SweptKey& k : keys)
    if (k.db == db && k.key == key) return;
  if (keys.size() < kMaxSweptKeys) keys.push_back({db, std::string(key)});
}

// Removes those of `names` that are expired entries of the set at `key` (selected db), replicating each
// removal as INFER.VREM; the key goes with its last element. Main thread, in a context that replicates
// (the write queue's or a timer's). Returns how many went.
size_t remove_expired(RedisModuleCtx* ctx, RedisModuleString* key, const std::vector<std::string>& names) {
  if (names.empty() || !cluster_write_refusal(ctx, view(key)).empty()) return 0;
  VsetKey k(ctx, key, REDISMODULE_READ | REDISMODULE_WRITE);
  if (!k.set) return 0;
  const long long now = now_ms();
  size_t removed = 0;
  for (const std::string& name : names) {
    auto attrs = k.set->attributes(name);
    std::string_view fp;
    std::optional<long long> exp = attrs ? entry_expiry(*attrs, &fp) : std::nullopt;
    if (!exp || !expired_at(*exp, now) || !k.set->remove(name)) continue;  // renewed or gone meanwhile
    rm::Replicate(ctx, "INFER.VREM", "sb", key, name.data(), name.size());
    ++removed;
  }
  if (removed == 0) return 0;
  if (k.set->size() == 0) rm::DeleteKey(k.key);
  rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "vrem", key);
  stats().cache_expired_removed += removed;
  return removed;
}

// Lazy removal of what a lookup met, from the write queue.
void post_removal(const CacheRequest& c, int db) {
  if (c.expired.empty()) return;
  post_write([key = str(c.key), names = c.expired, db](RedisModuleCtx* ctx, Writable writable) {
    if (writable != Writable::Yes) return;
    SelectedDb selected(ctx, db);
    RedisModuleString* k = rm::CreateString(nullptr, key.data(), key.size());
    remove_expired(ctx, k, names);
    rm::FreeString(nullptr, k);
  });
}

// Searches the set for the nearest live entry of the request's fingerprint. Any thread (the set
// read-locked off the main thread). Sets outcome, similarity, entry and expired.
void search(const vector::VectorSet& s, CacheRequest& c) {
  const long long now = now_ms();
  const std::function<bool(const std::string&, const std::string&)> accept = [&](const std::string& name,
                                                                                 const std::string& attrs) {
    std::string_view fp;
    std::optional<long long> exp = entry_expiry(attrs, &fp);
    if (!exp || fp != c.fingerprint) return false;
    if (expired_at(*exp, now)) {
      if (c.expired.size() < kSweepMaxRemovals) c.expired.push_back(name);
      return false;
    }
    return true;
  };
  vector::SearchOptions opt;
  opt.count = 1;
  opt.filter_ef = kLookupCandidates;
  opt.accept = &accept;
  c.outcome = CacheRequest::Outcome::Miss;
  const std::vector<vector::SearchHit> hits = s.search(c.vector, opt);
  if (hits.empty()) return;
  c.similarity = 2.0 * hits[0].score - 1.0;  // the set's score is (1 + cosine) / 2
  if (c.similarity < c.threshold) return;
  c.entry = nlohmann::json::parse(*hits[0].attrs, nullptr, false);
  if (c.entry.is_object()) c.outcome = CacheRequest::Outcome::Hit;
}

struct MissContinuation {
  GenerationJob* job;
  void (*on_miss)(GenerationJob*);
};

void miss_on_main(void* data) {
  std::unique_ptr<MissContinuation> m(static_cast<MissContinuation*>(data));
  try {
    m->on_miss(m->job);
  } catch (const std::exception& e) {
    m->job->error = std::string("internal error: ") + e.what();
    complete(m->job);
  }
}

// After the search: a hit completes the job (any thread); a miss goes on on the main thread.
void conclude(GenerationJob* job, void (*on_miss)(GenerationJob*), bool on_main) {
  CacheRequest& c = *job->cache;
  post_removal(c, job->db);
  if (c.outcome == CacheRequest::Outcome::Hit) {
    bool loaded = false;
    try {
      loaded = job->load_cached(c.entry);
    } catch (const std::exception&) {
      loaded = false;
    }
    if (loaded) return complete(job);
    c.outcome = CacheRequest::Outcome::Miss;  // an entry this version cannot read: generate anew
  }
  if (on_main) return on_miss(job);
  rm::EventLoopAddOneShot(miss_on_main, new MissContinuation{job, on_miss});
}

}  // namespace

bool is_cache_word(const RedisModuleString* s) {
  return is_word(s, "CACHE") || is_word(s, "THRESHOLD") || is_word(s, "TTL") || is_word(s, "SAMPLED");
}

bool parse_cache_option(RedisModuleString** argv, int argc, int* i, CacheOptions* o, std::string* err) {
  if (o->key) return *err = "CACHE given twice", false;
  if (*i + 1 >= argc || is_generation_option(argv[*i + 1]) || is_cache_word(argv[*i + 1])) {
    *err = needs_value("CACHE", "a key: CACHE key [THRESHOLD similarity] [TTL seconds] [SAMPLED]");
    if (*i + 1 < argc) *err += " ('" + str(argv[*i + 1]) + "' is an option, and a cache key may not be named like one)";
    return false;
  }
  o->key = argv[++*i];
  o->key_pos = *i;
  GivenOnce once;
  while (*i + 1 < argc) {
    RedisModuleString* w = argv[*i + 1];
    const bool has_value = *i + 2 < argc;
    if (is_word(w, "THRESHOLD")) {
      if (!once.first("THRESHOLD", err)) return false;
      if (!has_value) return *err = needs_value("THRESHOLD"), false;
      if (!parse_real(argv[*i + 2], -1, 1, "THRESHOLD", &o->threshold, err)) return false;
      *i += 2;
    } else if (is_word(w, "TTL")) {
      if (!once.first("TTL", err)) return false;
      if (!has_value) return *err = needs_value("TTL"), false;
      if (!parse_int(argv[*i + 2], 1, kMaxCacheTtlSeconds, "TTL", &o->ttl_s, err)) return false;
      *i += 2;
    } else if (is_word(w, "SAMPLED")) {
      if (!once.first("SAMPLED", err)) return false;
      o->sampled = true;
      *i += 1;
    } else {
      break;
    }
  }
  return true;
}

void report_cache_key(RedisModuleCtx* ctx, int pos) { rm::KeyAtPosWithFlags(ctx, pos, static_cast<int>(kCacheKeyFlags)); }

void Fingerprint::mix(std::string_view bytes) {
  // 8 bytes at a time (TOOLS and schemas may be large and this runs on the main thread), then a final
  // avalanche in hex().
  constexpr uint64_t kPrime = 0x100000001b3ull;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h_ = (h_ ^ w) * kPrime;
    h_ ^= h_ >> 32;
  }
  for (; i < bytes.size(); ++i) h_ = (h_ ^ static_cast<unsigned char>(bytes[i])) * kPrime;
}

void Fingerprint::add(std::string_view name, std::string_view value) {
  const uint64_t sizes[2] = {name.size(), value.size()};
  mix(std::string_view(reinterpret_cast<const char*>(sizes), sizeof sizes));
  mix(name);
  mix(value);
}

void Fingerprint::add_number(std::string_view name, double value) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.9g", value);
  add(name, buf);
}

std::string Fingerprint::hex() const {
  uint64_t h = h_;  // murmur3's finaliser
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return hex64(h);
}

std::string model_identity(const LoadedModel& m) {
  const size_t slash = m.path.rfind('/');
  std::string id = m.name + "|" + m.path.substr(slash == std::string::npos ? 0 : slash + 1);
  struct stat st {};
  if (stat(m.path.c_str(), &st) == 0) id += "|" + std::to_string(static_cast<long long>(st.st_size));
  return id;
}

CacheRequest::CacheRequest(RedisModuleString* k, const CacheOptions& o, std::string fp)
    : key(rm::CreateStringFromString(nullptr, k)), threshold(o.threshold), ttl_s(o.ttl_s), fingerprint(std::move(fp)) {}

CacheRequest::~CacheRequest() { rm::FreeString(nullptr, key); }

void cache_lookup(RedisModuleCtx* ctx, GenerationJob* job, void (*on_miss)(GenerationJob*)) {
  CacheRequest& c = *job->cache;
  remember_cache_key(rm::GetSelectedDb(ctx), view(c.key));
  VsetKey k(ctx, c.key, REDISMODULE_READ);
  if (k.wrong_type) {
    job->error_code = "WRONGTYPE";
    job->error = "CACHE key holds a value that is not a vector set";
    return complete(job);
  }
  if (!k.set) {
    c.outcome = CacheRequest::Outcome::Miss;
    return on_miss(job);
  }
  if (k.set->input_dim() != c.vector.size()) {
    job->error = "CACHE: vector dimension mismatch: the request embeds in " + std::to_string(c.vector.size()) +
                 " dimensions, the cache set takes " + std::to_string(k.set->input_dim()) +
                 " (a cache set holds the embeddings of one embedding model)";
    return complete(job);
  }
  if (k.set->size() >= static_cast<size_t>(settings().vsim_thread_threshold)) {
    c.set = k.shared;
    const bool queued = run_search_thread([job, on_miss] {
      CacheRequest& cr = *job->cache;
      if (job->cancellation->requested()) {
        cr.set.reset();
        return complete(job);
      }
      try {
        auto lock = cr.set->read();
        search(cr.set->set(), cr);
      } catch (const std::exception&) {
        cr.outcome = CacheRequest::Outcome::Miss;  // a lookup that fails generates anew
      }
      cr.set.reset();  // the search is done: a DEL may free the set now
      conclude(job, on_miss, false);
    });
    if (queued) return;
    c.set.reset();  // the queue is full: search here
  }
  try {
    search(*k.set, c);
  } catch (const vector::VectorSetError&) {
    c.outcome = CacheRequest::Outcome::Miss;
  }
  conclude(job, on_miss, true);
}

void cache_store(RedisModuleCtx* ctx, GenerationJob* job) {
  CacheRequest& c = *job->cache;
  if (c.vector.empty()) return;
  const std::string_view key = view(c.key);
  if (std::string refusal = cluster_write_refusal(ctx, key, nullptr, c.asked); !refusal.empty()) {
    rm::Log(ctx, "notice", "infer: CACHE entry not stored in '%.*s': %s", static_cast<int>(key.size()), key.data(),
            refusal.c_str());
    return;
  }
  nlohmann::ordered_json e;
  e["fp"] = c.fingerprint;  // first, then exp: the lookup reads them from the start (entry_expiry)
  e["exp"] = c.ttl_s > 0 ? now_ms() + c.ttl_s * 1000 : 0;
  job->save_cached(e);
  const std::string attrs = e.dump();
  if (attrs.size() > static_cast<size_t>(settings().max_attribute_bytes)) {
    rm::Log(ctx, "notice", "infer: CACHE entry of %zu bytes not stored: over infer.max-attribute-bytes", attrs.size());
    return;
  }
  const char* blob = reinterpret_cast<const char*>(c.vector.data());
  const size_t blob_len = c.vector.size() * sizeof(float);
  Fingerprint vector_hash;
  vector_hash.add("vector", std::string_view(blob, blob_len));
  const std::string element = c.fingerprint + ":" + vector_hash.hex();
  VsetKey k(ctx, c.key, REDISMODULE_READ | REDISMODULE_WRITE);
  if (k.wrong_type) return;  // became another type while generating
  try {
    if (!k.set) {
      vector::SetConfig cfg;
      cfg.dim = static_cast<uint32_t>(c.vector.size());
      auto fresh = std::make_unique<vector::VectorSet>(cfg);
      fresh->add(element, c.vector, attrs);
      k.store(std::move(fresh));
    } else {
      if (k.set->input_dim() != c.vector.size()) return;  // recreated with another dimension meanwhile
      k.set->add(element, c.vector, attrs);
    }
  } catch (const vector::VectorSetError& ex) {
    rm::Log(ctx, "notice", "infer: CACHE entry not stored: %s", ex.what());
    return;
  }
  rm::Replicate(ctx, "INFER.VADD", "scbbcb", c.key, "FP32", blob, blob_len, element.data(), element.size(), "SETATTR",
                attrs.data(), attrs.size());
  rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "vadd", c.key);
  ++stats().cache_stores;
  remember_cache_key(rm::GetSelectedDb(ctx), key);
}

namespace {

// One tick of the sweep (a timer: its context replicates what it removes).
void sweep_tick(RedisModuleCtx* ctx, void*) {
  rm::CreateTimer(ctx, kSweepPeriodMs, sweep_tick, nullptr);
  auto& keys = swept_keys();
  if (keys.empty() || rm::AvoidReplicaTraffic() || (rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE)) return;
  MainThreadTimer timer("infer cache sweep");
  const long long now = now_ms();
  size_t scanned = 0, removed = 0;
  for (size_t visited = 0; visited < keys.size() && scanned < kSweepMaxScanned && removed < kSweepMaxRemovals;
       ++visited) {
    const size_t at = g_next_swept++ % keys.size();
    SweptKey& sk = keys[at];
    SelectedDb selected(ctx, sk.db);
    RedisModuleString* name = rm::CreateString(nullptr, sk.key.data(), sk.key.size());
    std::vector<std::string> expired;
    bool gone = false;
    {
      VsetKey k(ctx, name, REDISMODULE_READ);  // reading on the main thread takes no lock
      if (!k.set) {
        gone = true;
      } else {
        const uint32_t slots = static_cast<uint32_t>(k.set->index().slots());
        uint32_t id = sk.cursor;
        for (; id < slots && scanned < kSweepMaxScanned && expired.size() + removed < kSweepMaxRemovals; ++id) {
          const vector::VectorSet::Element* e = k.set->element(id);
          if (!e) continue;
          ++scanned;
          std::string_view fp;
          std::optional<long long> exp = entry_expiry(e->attrs, &fp);
          if (exp && expired_at(*exp, now)) expired.push_back(e->name);
        }
        sk.cursor = id >= slots ? 0 : id;
      }
    }
    if (!expired.empty()) removed += remove_expired(ctx, name, expired);
    rm::FreeString(nullptr, name);
    if (gone) {  // the key is gone or is no set: forget it until a lookup or store names it again
      keys.erase(keys.begin() + static_cast<long>(at));
      if (keys.empty()) break;
    }
  }
}

}  // namespace

void start_cache_sweep(RedisModuleCtx* ctx) { rm::CreateTimer(ctx, kSweepPeriodMs, sweep_tick, nullptr); }

namespace {
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t n = (c >= 0xc2 && c <= 0xdf) ? 1 : (c >= 0xe0 && c <= 0xef) ? 2 : (c >= 0xf0 && c <= 0xf4) ? 3 : 0;
    if (n == 0 || i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    const auto d = static_cast<unsigned char>(s[i + 1]);  // no overlong forms, surrogates or code points past U+10FFFF
    if ((c == 0xe0 && d < 0xa0) || (c == 0xed && d >= 0xa0) || (c == 0xf0 && d < 0x90) || (c == 0xf4 && d >= 0x90))
      return false;
    i += n + 1;
  }
  return true;
}
}  // namespace

nlohmann::json json_bytes(const std::string& s) {
  if (valid_utf8(s)) return s;
  static const char* digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(s.size() * 2);
  for (unsigned char c : s) {
    hex.push_back(digits[c >> 4]);
    hex.push_back(digits[c & 15]);
  }
  return nlohmann::json{{"hex", hex}};
}

std::string bytes_of(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  const std::string hex = j.at("hex").get<std::string>();
  if (hex.size() % 2) throw std::invalid_argument("odd hex");
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, v, 16);
    if (ec != std::errc() || p != hex.data() + 2 * i + 2) throw std::invalid_argument("bad hex");
    out[i] = static_cast<char>(v);
  }
  return out;
}

}  // namespace infer::redis
