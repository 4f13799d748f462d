// The server events that end generation streams whose writer cannot (stream_registry.h):
//   SHUTDOWN   cancel every generation; append `finish shutdown` to each open stream. Redis 7.0 fires
//              this event after its final AOF fsync and RDB save, so the entries reach replicas (their
//              buffers are flushed after it) but not the files: when the shutdown had just saved the
//              RDB, it is saved again with them; an AOF still records the streams as open, and the next
//              start ends them (LOADING below).
//   promoted   (replica → master) append `finish failover` to each stream the old master left open.
//   demoted    (master → replica) stop the streaming generations: the new master ends their streams.
//   LOADING    a full resynchronisation forgets the old records; a master that loaded its AOF ends
//              the streams it recorded as open with `finish shutdown`.
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

#include "redis/blocked_call.h"
#include "redis/stream_registry.h"
#include "redis/stream_writer.h"
#include "redis/write_queue.h"

namespace infer::redis {
namespace {

bool is_replica(RedisModuleCtx* ctx) { return rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE; }

// INFO persistence's rdb_changes_since_last_save, or -1.
long long changes_since_last_save(RedisModuleCtx* ctx) {
  RedisModuleCallReply* r = rm::Call(ctx, "INFO", "c", "persistence");
  if (!r) return -1;
  long long n = -1;
  size_t len = 0;
  if (const char* p = rm::CallReplyStringPtr(r, &len)) {
    const std::string info(p, len);
    const std::string field = "rdb_changes_since_last_save:";
    if (size_t at = info.find(field); at != std::string::npos) n = std::atoll(info.c_str() + at + field.size());
  }
  rm::FreeCallReply(r);
  return n;
}

const char* plural(int n) { return n == 1 ? "" : "s"; }

// Server events are called by Redis: no exception may reach it.
template <RedisModuleEventCallback F>
void guarded(RedisModuleCtx* ctx, RedisModuleEvent e, uint64_t subevent, void* data) noexcept {
  try {
    F(ctx, e, subevent, data);
  } catch (const std::exception& ex) {
    rm::Log(ctx, "warning", "infer: ending open streams: %s", ex.what());
  } catch (...) {
    rm::Log(ctx, "warning", "infer: ending open streams failed");
  }
}

void on_shutdown(RedisModuleCtx* ctx, RedisModuleEvent, uint64_t, void*) {
  cancel_all_jobs();  // the engine threads go idle before the process exits
  if (is_replica(ctx)) return;
  // Clients are paused while a shutdown waits for lagging replicas: propagating then would assert.
  const bool propagate = !rm::AvoidReplicaTraffic();
  // 0: the shutdown has just saved the RDB (nothing changed since), which must then keep the entries.
  const bool rdb_just_saved = changes_since_last_save(ctx) == 0;
  int ended = 0;
  for (const auto& stream : local_streams()) ended += stream->end_now(ctx, "shutdown", propagate);
  ended += end_inherited_streams(ctx, "shutdown", propagate);  // a promotion's, not written yet
  if (ended == 0) return;
  rm::Log(ctx, "notice", "infer: SHUTDOWN ended %d open stream%s with 'finish shutdown'%s", ended, plural(ended),
          propagate ? "" : " (not sent to the paused replicas)");
  if (!rdb_just_saved) return;
  RedisModuleCallReply* r = rm::Call(ctx, "SAVE", "");
  const bool saved = r && rm::CallReplyType(r) != REDISMODULE_REPLY_ERROR;
  if (r) rm::FreeCallReply(r);
  rm::Log(ctx, saved ? "notice" : "warning", "infer: %s the RDB again with the finish entries",
          saved ? "saved" : "could not save");
}

void end_inherited_from_queue(const char* reason, const char* why) {
  post_write([reason, why](RedisModuleCtx* ctx, Writable writable) {
    if (writable != Writable::Yes) return;  // a replica again: kept for its next promotion
    const int ended = end_inherited_streams(ctx, reason, /*propagate=*/true);
    if (ended > 0)
      rm::Log(ctx, "notice", "infer: %s: ended %d stream%s left open with 'finish %s'", why, ended, plural(ended),
              reason);
  });
}

void on_role_changed(RedisModuleCtx* ctx, RedisModuleEvent, uint64_t subevent, void*) {
  if (subevent == REDISMODULE_SUBEVENT_REPLROLECHANGED_NOW_MASTER) {
    end_inherited_from_queue("failover", "promoted to master");
    return;
  }
  int stopped = 0;
  for (const auto& stream : local_streams()) {
    stream->stop_generation();
    ++stopped;
  }
  if (stopped > 0)
    rm::Log(ctx, "notice", "infer: demoted to replica: stopped %d streaming generation%s; the new master ends their streams",
            stopped, plural(stopped));
}

void on_loading(RedisModuleCtx* ctx, RedisModuleEvent, uint64_t subevent, void*) {
  if (subevent == REDISMODULE_SUBEVENT_LOADING_REPL_START) {
    clear_inherited_streams();
  } else if (subevent == REDISMODULE_SUBEVENT_LOADING_ENDED && !is_replica(ctx)) {
    end_inherited_from_queue("shutdown", "started from the AOF");
  }
}

}  // namespace

int subscribe_stream_endings(RedisModuleCtx* ctx) {
  const std::pair<uint64_t, RedisModuleEventCallback> events[] = {
      {REDISMODULE_EVENT_SHUTDOWN, guarded<on_shutdown>},
      {REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED, guarded<on_role_changed>},
      {REDISMODULE_EVENT_LOADING, guarded<on_loading>},
  };
  for (const auto& [id, callback] : events)
    if (rm::SubscribeToServerEvent(ctx, RedisModuleEvent{id, 1}, callback) != REDISMODULE_OK) return REDISMODULE_ERR;
  return REDISMODULE_OK;
}

}  // namespace infer::redis
