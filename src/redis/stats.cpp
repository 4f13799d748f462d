#include "redis/stats.h"

#include <ctime>
#include <mutex>
#include <vector>

#include "redis/args.h"
#include "redis/blocked_call.h"
#include "redis/models.h"
#include "redis/write_queue.h"

namespace infer::redis {

ModuleStats& stats() {
  // Never destroyed: a crash report at exit (after static destructors ran) still reads it.
  static auto* s = new ModuleStats;
  return *s;
}

namespace {
uint64_t thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}
}  // namespace

MainThreadTimer::MainThreadTimer(const char* name)
    : name_(name), start_us_(rm::MonotonicMicroseconds()), start_cpu_us_(thread_cpu_us()) {}

MainThreadTimer::~MainThreadTimer() {
  try {
    uint64_t us = rm::MonotonicMicroseconds() - start_us_;
    uint64_t cpu_us = thread_cpu_us() - start_cpu_us_;
    auto it = stats().timing.find(name_);
    if (it == stats().timing.end()) it = stats().timing.emplace(name_, CommandTiming{}).first;
    CommandTiming& t = it->second;
    ++t.calls;
    t.total_us += us;
    if (us > t.max_us) t.max_us = us;
    if (cpu_us > t.max_cpu_us) t.max_cpu_us = cpu_us;
  } catch (...) {  // a destructor must not throw; losing one sample is fine
  }
}

namespace {

// Adds the counters of `s` (what only grows) to `sum`.
void add_counters(engine::EngineStats& sum, const engine::EngineStats& s) {
  sum.completed += s.completed;
  sum.rejected_busy += s.rejected_busy;
  sum.timeouts += s.timeouts;
  sum.cancelled += s.cancelled;
  sum.errors += s.errors;
  sum.tokens_generated += s.tokens_generated;
  sum.prompt_tokens += s.prompt_tokens;
  sum.cached_tokens += s.cached_tokens;
  sum.cache_lookups += s.cache_lookups;
  sum.cache_hits += s.cache_hits;
  sum.cache_evictions += s.cache_evictions;
}

// Engines gone from the registry keep counting in the totals, so that they stay monotonic across
// INFER.UNLOAD: while an unloaded engine finishes its requests its stats are read live, then its final
// ones are kept. Any thread (the last reference to an engine can drop anywhere).
struct RetiredEngines {
  struct Unloaded {
    const engine::Engine* id;
    std::weak_ptr<engine::Engine> engine;
    engine::EngineStats last;  // as last read: what counts if it is destroyed before the next read
  };
  std::mutex mu;
  engine::EngineStats destroyed;  // counters of unloaded engines already destroyed
  std::vector<Unloaded> unloaded;
};

RetiredEngines& retired() {
  static RetiredEngines r;
  return r;
}

// Counters of all unloaded engines.
engine::EngineStats retired_counters() {
  RetiredEngines& r = retired();
  std::vector<std::shared_ptr<engine::Engine>> alive;  // dropped after the unlock: it may run a deleter
  engine::EngineStats sum;
  std::lock_guard lk(r.mu);
  for (auto& u : r.unloaded) {
    if (auto e = u.engine.lock()) {
      u.last = e->stats();
      alive.push_back(std::move(e));
    }
    add_counters(sum, u.last);
  }
  add_counters(sum, r.destroyed);
  return sum;
}

// Engine counters summed over all loaded models, and the counters of unloaded ones.
engine::EngineStats total_engine_stats() {
  engine::EngineStats sum = retired_counters();
  for (const auto& [name, m] : models().all()) {
    engine::EngineStats s = m->engine->stats();
    add_counters(sum, s);
    sum.queued += s.queued;
    sum.running += s.running;
    sum.decode_tps += s.decode_tps;
    sum.kv_pages_total += s.kv_pages_total;
    sum.kv_pages_used += s.kv_pages_used;
    sum.kv_pages_cached += s.kv_pages_cached;
    sum.kv_bytes += s.kv_bytes;
    sum.model_bytes += s.model_bytes;
  }
  return sum;
}

double hit_rate(const engine::EngineStats& s) {
  return s.cache_lookups ? static_cast<double>(s.cache_hits) / static_cast<double>(s.cache_lookups) : 0.0;
}

uint64_t max_stall_us() {
  uint64_t m = 0;
  for (const auto& [name, t] : stats().timing) m = t.max_us > m ? t.max_us : m;
  return m;
}

// Writes key/value pairs into a map reply of postponed or known length, counting them.
struct MapPairs {
  RedisModuleCtx* ctx;
  long n = 0;
  void ll(const char* k, long long v) {
    rm::ReplyWithCString(ctx, k);
    rm::ReplyWithLongLong(ctx, v);
    ++n;
  }
  void dbl(const char* k, double v) {
    rm::ReplyWithCString(ctx, k);
    rm::ReplyWithDouble(ctx, v);
    ++n;
  }
};

// One engine's counters as map pairs.
void reply_engine_stats(MapPairs& out, const engine::EngineStats& s) {
  out.ll("queued", s.queued);
  out.ll("running", s.running);
  out.ll("completed", static_cast<long long>(s.completed));
  out.ll("rejected", static_cast<long long>(s.rejected_busy));
  out.ll("timeouts", static_cast<long long>(s.timeouts));
  out.ll("cancelled", static_cast<long long>(s.cancelled));
  out.ll("errors", static_cast<long long>(s.errors));
  out.ll("tokens_generated", static_cast<long long>(s.tokens_generated));
  out.ll("prompt_tokens", static_cast<long long>(s.prompt_tokens));
  out.ll("cached_tokens", static_cast<long long>(s.cached_tokens));
  out.dbl("tokens_per_second", s.decode_tps);
  out.dbl("prefix_cache_hit_rate", hit_rate(s));
  out.ll("kv_pages_used", s.kv_pages_used);
  out.ll("kv_pages_total", s.kv_pages_total);
  out.ll("kv_pages_cached", s.kv_pages_cached);
  out.ll("kv_bytes", static_cast<long long>(s.kv_bytes));
  out.ll("model_bytes", static_cast<long long>(s.model_bytes));
}

// The latency metrics in report order, with their names in INFO and INFER.STATS.
const std::pair<const char*, engine::LatencyPercentiles engine::LatencySummary::*> kLatencyMetrics[] = {
    {"queue_ms", &engine::LatencySummary::queue_ms},
    {"ttft_ms", &engine::LatencySummary::ttft_ms},
    {"tpot_ms", &engine::LatencySummary::tpot_ms},
    {"e2e_ms", &engine::LatencySummary::e2e_ms}};

// latency => {samples, queue_ms => {p50, p90, p99}, ttft_ms => ..., tpot_ms => ..., e2e_ms => ...}
void reply_latency(MapPairs& out, const engine::LatencySummary& l) {
  rm::ReplyWithCString(out.ctx, "latency");
  rm::ReplyWithMap(out.ctx, 1 + 4);
  MapPairs inner{out.ctx};
  inner.ll("samples", static_cast<long long>(l.samples));
  for (const auto& [name, member] : kLatencyMetrics) {
    rm::ReplyWithCString(out.ctx, name);
    rm::ReplyWithMap(out.ctx, 3);
    MapPairs p{out.ctx};
    p.dbl("p50", (l.*member).p50);
    p.dbl("p90", (l.*member).p90);
    p.dbl("p99", (l.*member).p99);
  }
  ++out.n;
}

}  // namespace

void retire_engine(const std::shared_ptr<engine::Engine>& e) {
  const engine::EngineStats now = e->stats();
  std::lock_guard lk(retired().mu);
  retired().unloaded.push_back({e.get(), e, now});
}

void engine_destroyed(const engine::Engine* e) {
  RetiredEngines& r = retired();
  std::lock_guard lk(r.mu);
  for (auto it = r.unloaded.begin(); it != r.unloaded.end(); ++it) {
    if (it->id != e) continue;
    add_counters(r.destroyed, e->stats());  // final: no request is left
    r.unloaded.erase(it);
    return;
  }
}

int cmd_stats(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc > 2) return rm::WrongArity(ctx);
  if (argc == 2) {
    auto m = models().find(view(argv[1]));
    if (!m) return reply_error(ctx, "unknown model '" + str(argv[1]) + "'");
    rm::ReplyWithMap(ctx, REDISMODULE_POSTPONED_LEN);
    MapPairs out{ctx};
    reply_engine_stats(out, m->engine->stats());
    reply_latency(out, m->engine->latency());
    rm::ReplySetMapLength(ctx, out.n);
    return REDISMODULE_OK;
  }
  const ModuleStats& ms = stats();
  rm::ReplyWithMap(ctx, REDISMODULE_POSTPONED_LEN);
  MapPairs out{ctx};
  reply_engine_stats(out, total_engine_stats());
  out.ll("models", static_cast<long long>(models().all().size()));
  out.ll("generate_requests", static_cast<long long>(ms.generate_requests));
  out.ll("busy_replies", static_cast<long long>(ms.busy_replies));
  out.ll("client_timeouts", static_cast<long long>(ms.timeouts));
  out.ll("client_disconnects", static_cast<long long>(ms.disconnects));
  out.ll("stream_entries", static_cast<long long>(ms.stream_entries));
  out.ll("cache_hits", static_cast<long long>(ms.cache_hits));
  out.ll("cache_misses", static_cast<long long>(ms.cache_misses));
  out.ll("cache_bypassed", static_cast<long long>(ms.cache_bypassed));
  out.ll("cache_stores", static_cast<long long>(ms.cache_stores));
  out.ll("cache_expired_removed", static_cast<long long>(ms.cache_expired_removed));
  out.ll("max_main_thread_stall_us", static_cast<long long>(max_stall_us()));
  // Per command: calls, max_us (wall), max_cpu_us, avg_us.
  rm::ReplyWithCString(ctx, "main_thread_us");
  rm::ReplyWithMap(ctx, static_cast<long>(ms.timing.size()));
  for (const auto& [name, t] : ms.timing) {
    rm::ReplyWithCString(ctx, name.c_str());
    rm::ReplyWithMap(ctx, 4);
    MapPairs timing{ctx};
    timing.ll("calls", static_cast<long long>(t.calls));
    timing.ll("max_us", static_cast<long long>(t.max_us));
    timing.ll("max_cpu_us", static_cast<long long>(t.max_cpu_us));
    timing.ll("avg_us", static_cast<long long>(t.calls ? t.total_us / t.calls : 0));
  }
  ++out.n;  // the main_thread_us pair
  rm::ReplySetMapLength(ctx, out.n);
  return REDISMODULE_OK;
}

namespace {
// The engine counters of INFO: for all models together, and inside each model's dict field.
void info_engine_fields(RedisModuleInfoCtx* ctx, const engine::EngineStats& s) {
  rm::InfoAddFieldLongLong(ctx, "queued", s.queued);
  rm::InfoAddFieldLongLong(ctx, "running", s.running);
  rm::InfoAddFieldULongLong(ctx, "completed", s.completed);
  rm::InfoAddFieldULongLong(ctx, "rejected", s.rejected_busy);
  rm::InfoAddFieldULongLong(ctx, "timeouts", s.timeouts);
  rm::InfoAddFieldULongLong(ctx, "cancelled", s.cancelled);
  rm::InfoAddFieldULongLong(ctx, "errors", s.errors);
  rm::InfoAddFieldULongLong(ctx, "tokens_generated", s.tokens_generated);
  rm::InfoAddFieldDouble(ctx, "tokens_per_second", s.decode_tps);
  rm::InfoAddFieldDouble(ctx, "prefix_cache_hit_rate", hit_rate(s));
  rm::InfoAddFieldLongLong(ctx, "kv_pages_used", s.kv_pages_used);
  rm::InfoAddFieldLongLong(ctx, "kv_pages_total", s.kv_pages_total);
  rm::InfoAddFieldLongLong(ctx, "kv_pages_cached", s.kv_pages_cached);
}
}  // namespace

void info_callback(RedisModuleInfoCtx* ctx, int for_crash_report) {
  // Nothing here may throw or allocate much; a crash report only gets the module counters.
  try {
    const ModuleStats& ms = stats();
    rm::InfoAddSection(ctx, "");  // section "infer", fields prefixed "infer_"
    rm::InfoAddFieldULongLong(ctx, "models", models().all().size());
    rm::InfoAddFieldULongLong(ctx, "generate_requests", ms.generate_requests);
    rm::InfoAddFieldULongLong(ctx, "busy_replies", ms.busy_replies);
    rm::InfoAddFieldULongLong(ctx, "client_timeouts", ms.timeouts);
    rm::InfoAddFieldULongLong(ctx, "client_disconnects", ms.disconnects);
    rm::InfoAddFieldULongLong(ctx, "stream_entries", ms.stream_entries);
    rm::InfoAddFieldULongLong(ctx, "cache_hits", ms.cache_hits);
    rm::InfoAddFieldULongLong(ctx, "cache_misses", ms.cache_misses);
    rm::InfoAddFieldULongLong(ctx, "cache_bypassed", ms.cache_bypassed);
    rm::InfoAddFieldULongLong(ctx, "cache_stores", ms.cache_stores);
    rm::InfoAddFieldULongLong(ctx, "cache_expired_removed", ms.cache_expired_removed);
    rm::InfoAddFieldULongLong(ctx, "max_main_thread_stall_us", max_stall_us());
    if (for_crash_report) return;
    rm::InfoAddFieldLongLong(ctx, "blocked_clients", blocked_jobs());
    rm::InfoAddFieldLongLong(ctx, "writes_deferred", pending_writes());
    // What infer.max-memory counts: the memory plans of the engines alive (unloaded ones until freed).
    rm::InfoAddFieldULongLong(ctx, "memory_bytes", committed_memory());
    info_engine_fields(ctx, total_engine_stats());
    // One dict field per model: infer_model_<name>:queued=..,running=..,...,device=cpu (the backend's
    // description has commas: INFER.INFO shows it)
    for (const auto& [name, m] : models().all()) {
      std::string field = "model_" + name;
      rm::InfoBeginDictField(ctx, field.c_str());
      const engine::EngineStats s = m->engine->stats();
      info_engine_fields(ctx, s);
      rm::InfoAddFieldCString(ctx, "device", engine::device_name(s.device));
      rm::InfoAddFieldCString(ctx, "kv_type", engine::kv_type_name(s.kv_type));
      rm::InfoAddFieldULongLong(ctx, "kv_bytes_per_token", s.kv_bytes_per_token);
      rm::InfoEndDictField(ctx);
      // infer_latency_<metric>_<name>:p50=..,p90=..,p99=..,samples=n (as Redis's latency_percentiles_usec_*)
      const engine::LatencySummary l = m->engine->latency();
      for (const auto& [metric, member] : kLatencyMetrics) {
        const std::string lfield = std::string("latency_") + metric + "_" + name;
        rm::InfoBeginDictField(ctx, lfield.c_str());
        rm::InfoAddFieldDouble(ctx, "p50", (l.*member).p50);
        rm::InfoAddFieldDouble(ctx, "p90", (l.*member).p90);
        rm::InfoAddFieldDouble(ctx, "p99", (l.*member).p99);
        rm::InfoAddFieldULongLong(ctx, "samples", l.samples);
        rm::InfoEndDictField(ctx);
      }
    }
  } catch (...) {
  }
}

}  // namespace infer::redis
