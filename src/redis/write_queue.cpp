#include "redis/write_queue.h"

#include <deque>
#include <exception>
#include <mutex>

#include "redis/stats.h"

namespace infer::redis {
namespace {

RedisModuleCtx* g_module_ctx = nullptr;  // made in OnLoad, never freed: names the module to CreateTimer

// How often a paused queue looks again: a pause lasts at least as long as the command that set it.
constexpr long long kPausedRetryMs = 10;

struct Queue {
  std::mutex mu;
  std::deque<QueuedWrite> writes;  // guarded by mu
  bool drain_scheduled = false;    // guarded by mu: an event or a timer will drain
};

Queue& queue() {
  static auto* q = new Queue;  // never destroyed: threads may post during shutdown
  return *q;
}

void drain_timer(RedisModuleCtx* ctx, void*);

// Why a timer: the event-loop callback has no context, and what RM_Call("!") and Replicate queue for
// replicas and the AOF is sent when a timer's context is released, right after the callback.
void drain_event(void*) { rm::CreateTimer(g_module_ctx, 0, drain_timer, nullptr); }

void drain_timer(RedisModuleCtx* ctx, void*) {
  if (rm::AvoidReplicaTraffic()) {  // clients are paused: propagating now would assert (write_queue.h)
    rm::CreateTimer(ctx, kPausedRetryMs, drain_timer, nullptr);
    return;
  }
  const Writable writable = (rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) ? Writable::Replica : Writable::Yes;
  std::deque<QueuedWrite> batch;
  {
    std::lock_guard<std::mutex> lock(queue().mu);
    batch.swap(queue().writes);
    queue().drain_scheduled = false;  // what is posted from now on schedules its own drain
  }
  MainThreadTimer timer("infer write queue");
  for (QueuedWrite& write : batch) {
    try {
      write(ctx, writable);
    } catch (const std::exception& e) {
      rm::Log(ctx, "warning", "infer: a queued write failed: %s", e.what());
    } catch (...) {
      rm::Log(ctx, "warning", "infer: a queued write failed");
    }
  }
}

}  // namespace

void init_write_queue(RedisModuleCtx* onload_ctx) {
  if (!g_module_ctx) g_module_ctx = rm::GetDetachedThreadSafeContext(onload_ctx);
}

void post_write(QueuedWrite write) {
  {
    std::lock_guard<std::mutex> lock(queue().mu);
    queue().writes.push_back(std::move(write));
    if (queue().drain_scheduled) return;
    queue().drain_scheduled = true;
  }
  // Outside the lock: this wakes the main thread, which then takes the lock to drain.
  rm::EventLoopAddOneShot(drain_event, nullptr);
}

void replicate_to_replicas(const char* command, std::vector<std::string> args) {
  post_write([command, args = std::move(args)](RedisModuleCtx* ctx, Writable writable) {
    if (writable != Writable::Yes) return;
    std::vector<RedisModuleString*> argv;
    for (const std::string& a : args) argv.push_back(rm::CreateString(ctx, a.data(), a.size()));
    rm::Replicate(ctx, command, "Av", argv.data(), argv.size());  // A: replicas only, not the AOF
    for (RedisModuleString* a : argv) rm::FreeString(ctx, a);
  });
}

long long pending_writes() {
  std::lock_guard<std::mutex> lock(queue().mu);
  return static_cast<long long>(queue().writes.size());
}

}  // namespace infer::redis
