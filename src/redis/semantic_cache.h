// The semantic cache of INFER.GENERATE and INFER.RAG: CACHE key [THRESHOLD similarity] [TTL seconds]
// [SAMPLED]. A request's prompt (a chat as rendered; RAG: its query) is embedded, and the cache's
// vector set `key` is searched for the nearest entry with the same fingerprint (a hash of everything
// else that changes the answer: model and its file, template and chat arguments, tools, output
// constraint, sampling options, MAXTOKENS, STOP, RAG's retrieval options). An entry at cosine
// similarity >= THRESHOLD is a hit: the command replies with its answer and generates nothing. A miss
// generates, then stores the answer as an element of the set (vector: the prompt's embedding;
// attributes: fingerprint, expiry and answer) from the write queue, replicated as INFER.VADD.
// Entries past their TTL are never hit; they are removed when a lookup meets them and by a periodic
// sweep (kSweepPeriodMs, at most kSweepMaxRemovals per tick), each removal replicated as INFER.VREM.
//
// Threads: parsing, store and sweep on the main thread; a lookup searches on the main thread or, for a
// set of at least infer.vsim-thread-threshold elements, on a search thread (vset_threads.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "redis/module_api.h"
#include "redis/models.h"
#include "redis/vset_type.h"

namespace infer::redis {

struct GenerationJob;

// THRESHOLD is a cosine similarity in [-1, 1]; an INFER.VSIM score s is the cosine 2s - 1.
inline constexpr double kDefaultCacheThreshold = 0.95;
// TTL is 1 s to 10 years; without TTL entries never expire.
inline constexpr long long kMaxCacheTtlSeconds = 10LL * 366 * 24 * 3600;
// The sweep: every kSweepPeriodMs it looks at up to kSweepMaxScanned elements of the cache sets this
// node stored into or looked up (resuming where it stopped) and removes at most kSweepMaxRemovals
// expired entries.
inline constexpr long long kSweepPeriodMs = 100;
inline constexpr size_t kSweepMaxScanned = 512;
inline constexpr size_t kSweepMaxRemovals = 16;
// A lookup inspects at most this many candidates for one of its fingerprint (FILTER-EF of VSIM).
inline constexpr size_t kLookupCandidates = 1000;

struct CacheOptions {
  RedisModuleString* key = nullptr;  // argv: valid during the handler only
  int key_pos = -1;                  // its argv index, for key-position queries
  double threshold = kDefaultCacheThreshold;
  long long ttl_s = 0;  // 0: no expiry
  bool sampled = false;
};

// True when s is CACHE's keyword or one of its sub-options (THRESHOLD, TTL, SAMPLED).
bool is_cache_word(const RedisModuleString* s);
// Parses CACHE key [THRESHOLD s] [TTL seconds] [SAMPLED] with argv[*i] == "CACHE"; leaves *i on its
// last argument. False with `err` set on a mistake (CACHE or a sub-option given twice, a bad value).
bool parse_cache_option(RedisModuleString** argv, int argc, int* i, CacheOptions* o, std::string* err);

// Declares the CACHE key at argv[pos] to a key-position query: read (lookup), insert (store) and
// delete (expired entries): UPDATE, as Redis has no flag for both. Main thread.
void report_cache_key(RedisModuleCtx* ctx, int pos);
// Its flags, for key specs.
inline constexpr uint64_t kCacheKeyFlags = REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS |
                                           REDISMODULE_CMD_KEY_UPDATE;

// A 64-bit hash of named fields, in the order added (length-prefixed, so fields cannot run together).
class Fingerprint {
 public:
  void add(std::string_view name, std::string_view value);
  void add_number(std::string_view name, double value);
  std::string hex() const;  // 16 lowercase hex digits

 private:
  uint64_t h_ = 14695981039346656037ull;
  void mix(std::string_view bytes);
};

// The model as the fingerprint names it: its name, file name and file size (the same file on a replica
// gives the same fingerprint wherever it lives). Main thread.
std::string model_identity(const LoadedModel& m);

// One request's use of the cache, owned by its job.
struct CacheRequest {
  CacheRequest(RedisModuleString* key, const CacheOptions& o, std::string fingerprint);
  ~CacheRequest();
  CacheRequest(const CacheRequest&) = delete;
  CacheRequest& operator=(const CacheRequest&) = delete;

  enum class Outcome { Pending, Hit, Miss };
  RedisModuleString* key;  // owned
  double threshold;
  long long ttl_s;
  std::string fingerprint;
  bool asked = false;             // routed here by ASKING (cluster_slots.h)
  // INFER.GENERATE's EMBEDDER (null: the model embeds its own prepared prompt), and the text it embeds
  // for a chat (the rendering; a PROMPT is embedded as given).
  std::shared_ptr<const LoadedModel> embedder;
  std::string text;
  std::vector<float> vector;      // the request's embedding, once made
  Outcome outcome = Outcome::Pending;
  double similarity = 0;          // a hit's cosine similarity
  nlohmann::json entry;           // a hit's attributes, parsed
  std::vector<std::string> expired;  // expired entries the search met: removed from the write queue
  VsetRef set;                    // a threaded search's set
};

// Main thread, with the client blocked: searches job->cache (its vector made) in the client's database
// (`ctx` bound to it). A hit fills the job from the entry (GenerationJob::load_cached) and completes it;
// a miss calls on_miss(job) on the main thread; an error (the key holds another type, another
// dimension) completes the job with it.
void cache_lookup(RedisModuleCtx* ctx, GenerationJob* job, void (*on_miss)(GenerationJob*));

// Main thread, from the write queue: stores the job's answer (GenerationJob::save_cached) under its
// cache request and replicates the add. Failing to store never fails the command: it is logged.
void cache_store(RedisModuleCtx* ctx, GenerationJob* job);

// OnLoad: starts the sweep timer.
void start_cache_sweep(RedisModuleCtx* ctx);

// Strings that may hold any bytes (generated text, element names) in JSON: a string when valid UTF-8,
// else {"hex": "..."}; bytes_of reads either back.
nlohmann::json json_bytes(const std::string& s);
std::string bytes_of(const nlohmann::json& j);

}  // namespace infer::redis
