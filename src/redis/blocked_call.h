// The one blocking sequence of every INFER.* command that works off the main thread (spec §3.1):
//   main thread  block_client(ctx, job): blocks the caller; the job belongs to the blocked client now;
//   any thread   the work runs (background thread, engine, search threads) and ends with complete(job);
//   main thread  the job's keyspace writes, if it has any, run from the write queue (in order, never
//                during a client pause, never on a replica: write_queue.h), then the client is unblocked;
//   main thread  the reply callback replies from the job, when the client is still there; the free
//                callback deletes the job, always.
// A client that disconnects or is CLIENT UNBLOCKed abandons its job (the work is asked to stop); the work
// still ends with complete(), once, and nothing about the client is touched after it left. A CLIENT
// UNBLOCK that comes after the work ended (before the client's reply) gets the client its result. Every
// callback runs inside the same guard: an exception is logged (and replied when a reply is due), never
// passed to Redis.
//
// Clients are blocked without a Redis timeout: a command's TIMEOUT is its work's deadline. (In Redis 7.0
// a block timeout that expires after UnblockClient but before the main thread processes it leaves the
// client with no reply at all.)
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "engine/engine.h"
#include "redis/module_api.h"
#include "redis/write_queue.h"

namespace infer::redis {

// Asks a job's work to stop: a flag, plus the engine request's handle once there is one (cancel() may
// come first; a handle set after it is cancelled at once). Thread-safe.
class Cancellation {
 public:
  void set(engine::Handle h);
  void cancel();
  bool requested();

 private:
  std::mutex mu_;
  engine::Handle handle_;  // guarded by mu_
  bool requested_ = false;  // guarded by mu_
};

enum class Abandon { Disconnected, Unblocked };

// A blocked command's state. Commands derive from it and override what they need.
class BlockedJob {
 public:
  // `command` names timings and logs ("infer.embed"); `subject` the work in messages ("embedding").
  BlockedJob(const char* command, const char* subject) : command(command), subject(subject) {}
  virtual ~BlockedJob() = default;

  // Main thread, in the reply callback: the reply. Only when the client is still there.
  virtual int reply(RedisModuleCtx* ctx) = 0;
  // True when the finished job has keyspace writes; then write() runs from the write queue, with the
  // client's database selected, before the client is unblocked. Called on the thread that completes.
  virtual bool has_writes() const { return false; }
  virtual void write(RedisModuleCtx*, Writable) {}
  // Main thread, once: before reply(), or when the job is freed without one. Changes to the module's
  // own state that must happen whether or not the client is still there (registering a loaded model).
  virtual void settle() {}
  // Main thread: the client left or was unblocked. Default: ask the work to stop.
  virtual void abandon(Abandon) { cancellation->cancel(); }

  const char* const command;
  const char* const subject;
  std::shared_ptr<Cancellation> cancellation = std::make_shared<Cancellation>();
  // Main thread only, after block_client.
  RedisModuleBlockedClient* bc = nullptr;
  int db = 0;              // the client's selected database when it blocked
  bool unblocked = false;  // CLIENT UNBLOCK replied already
  // The work has ended and the client waits to be handed back to Redis (set on any thread; read on the
  // main thread by the CLIENT UNBLOCK callback).
  std::atomic<bool> handed_back{false};
  bool client_gone = false;  // disconnected, killed or unblocked: no reply() will run
  bool settled = false;
};

// Blocks the client of ctx for `job` and returns it, owned by the blocked client from now on. Main
// thread; the command must have checked refuse_if_cannot_block (args.h).
BlockedJob* block_client(RedisModuleCtx* ctx, std::unique_ptr<BlockedJob> job);

// The work is done: the job's writes (if any), then its reply. Once per job; any thread; the job
// belongs to the main thread after it.
void complete(BlockedJob* job);

// Gives the client back for a job whose work never started (a queue was full): no callback runs, and
// the job is the caller's again. Main thread, right after block_client, before any work was handed it.
std::unique_ptr<BlockedJob> abort_blocked(BlockedJob* job);

// Asks the work of every blocked job to stop (SHUTDOWN). Main thread.
void cancel_all_jobs();

// Jobs blocked and not yet freed (INFO infer `blocked_jobs`; a leak shows here). Main thread.
long long blocked_jobs();

// Module load, last: finished jobs are handed back to Redis in the event loop's "before sleep" event
// (blocked_call.cpp says why). Without it (REDISMODULE_ERR) they are handed back at once, as before.
int subscribe_hand_backs(RedisModuleCtx* ctx);

}  // namespace infer::redis
