// Every keyspace write the module makes outside a client command (a finished job's STORE, a stream's
// entries) goes through this one queue, so that such writes:
//   - run on the main thread in a context whose release sends them to replicas and the AOF (a timer's);
//   - keep their order, across commands;
//   - never run while clients are paused (CLIENT PAUSE WRITE, CLUSTER FAILOVER, FAILOVER): propagating
//     then asserts in Redis 7.0 (spec "Client pause"), so the queue waits, in order, until the pause ends;
//   - never run on a replica (a failover may have demoted the node while the work ran): the write is
//     told so (Writable::No) and must not write.
// Thread-safe: post from any thread; the writes themselves run on the main thread.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "redis/module_api.h"

namespace infer::redis {

// What a write may do when its turn comes. Yes: write through `ctx`. Replica: this node is a replica
// now; write nothing (say why in the reply, log it).
enum class Writable { Yes, Replica };

// A queued write: called once on the main thread. It must not throw (the queue catches and logs).
using QueuedWrite = std::function<void(RedisModuleCtx* ctx, Writable writable)>;

// Queues `write` behind every write queued before it. Any thread.
void post_write(QueuedWrite write);

// Sends `command args...` to this node's replicas only (not the AOF), from the queue: for state that
// replicas should share but that is the node's configuration, not data (INFER.LOAD / INFER.UNLOAD).
// Nothing is sent while the node is itself a replica. Any thread.
void replicate_to_replicas(const char* command, std::vector<std::string> args);

// Selects database `db` on `ctx` for its lifetime, then the one selected before: a queued write runs
// in the database of the client that asked for it. Main thread.
class SelectedDb {
 public:
  SelectedDb(RedisModuleCtx* ctx, int db) : ctx_(ctx), previous_(rm::GetSelectedDb(ctx)) {
    if (db != previous_) rm::SelectDb(ctx_, db);
  }
  ~SelectedDb() { rm::SelectDb(ctx_, previous_); }
  SelectedDb(const SelectedDb&) = delete;
  SelectedDb& operator=(const SelectedDb&) = delete;

 private:
  RedisModuleCtx* ctx_;
  int previous_;
};

// Main thread, OnLoad: the long-lived context that names the module when the queue creates timers.
void init_write_queue(RedisModuleCtx* onload_ctx);

// Writes queued and not yet run (INFO infer `writes_deferred`). Any thread.
long long pending_writes();

}  // namespace infer::redis
