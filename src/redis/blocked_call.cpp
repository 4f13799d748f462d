#include "redis/blocked_call.h"

#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "redis/args.h"
#include "redis/stats.h"

namespace infer::redis {
namespace {

// Blocked client → job, for the disconnect and CLIENT UNBLOCK callbacks. Main thread only.
std::unordered_map<RedisModuleBlockedClient*, BlockedJob*>& live_jobs() {
  static auto* m = new std::unordered_map<RedisModuleBlockedClient*, BlockedJob*>;  // never destroyed
  return *m;
}

BlockedJob* job_of(RedisModuleBlockedClient* bc) {
  auto it = live_jobs().find(bc);
  return it == live_jobs().end() ? nullptr : it->second;
}

// The guard every callback runs in: no exception reaches Redis; what was caught is logged.
template <class F>
bool guarded(const char* command, const char* phase, F&& f) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    rm::Log(nullptr, "warning", "infer: %s %s: %s", command, phase, e.what());
  } catch (...) {
    rm::Log(nullptr, "warning", "infer: %s %s: unknown error", command, phase);
  }
  return false;
}

void settle_once(BlockedJob* job) {
  if (job->settled) return;
  job->settled = true;
  job->settle();
}

// The job's settle() (once) and reply, inside the guard: the reply callback's work, and CLIENT UNBLOCK's
// when the work had already ended.
int reply_result(RedisModuleCtx* ctx, BlockedJob* job) {
  int rc = REDISMODULE_OK;
  const bool ok = guarded(job->command, "reply", [&] {
    const std::string timer_name = std::string(job->command) + " reply";
    MainThreadTimer timer(timer_name.c_str());
    settle_once(job);
    rc = job->reply(ctx);
  });
  if (!ok) return rm::ReplyWithError(ctx, "ERR internal error while replying");
  return rc;
}

int on_reply(RedisModuleCtx* ctx, RedisModuleString**, int) {
  return reply_result(ctx, static_cast<BlockedJob*>(rm::GetBlockedClientPrivateData(ctx)));
}

// Only CLIENT UNBLOCK gets here: clients are blocked without a Redis timeout. Work that has already
// ended (its client waits for the next hand-back) replies its result: there is nothing to cancel.
int on_unblocked(RedisModuleCtx* ctx, RedisModuleString**, int) {
  BlockedJob* job = job_of(rm::GetBlockedClientHandle(ctx));
  if (job && job->handed_back.load(std::memory_order_acquire)) {
    job->client_gone = true;
    return reply_result(ctx, job);
  }
  std::string msg = "UNBLOCKED client unblocked; ";
  msg += job ? job->subject : "work";
  msg += " cancelled";
  if (job) {
    guarded(job->command, "unblock", [&] {
      job->unblocked = true;
      job->client_gone = true;
      job->abandon(Abandon::Unblocked);
    });
  }
  return rm::ReplyWithError(ctx, msg.c_str());
}

void on_disconnect(RedisModuleCtx*, RedisModuleBlockedClient* bc) {
  BlockedJob* job = job_of(bc);
  if (!job) return;
  guarded(job->command, "disconnect", [&] {
    job->client_gone = true;
    job->abandon(Abandon::Disconnected);
    ++stats().disconnects;
  });
}

void free_job(RedisModuleCtx*, void* privdata) {
  auto* job = static_cast<BlockedJob*>(privdata);
  guarded(job->command, "free", [&] {
    live_jobs().erase(job->bc);
    settle_once(job);
  });
  delete job;
}

void hand_back_now(BlockedJob* job) {
  rm::BlockedClientMeasureTimeEnd(job->bc);
  rm::UnblockClient(job->bc, job);  // never NULL: free_job runs and deletes the job
}

// Finished jobs wait here for the event loop's next "before sleep" event, which Redis fires right
// before it serves the clients that modules unblocked: no command runs between the two. Unblocked
// from another thread, or earlier in the loop, a client sits in Redis's queue while commands run, and
// in Redis 7.0 a CLIENT UNBLOCK that comes then calls none of the module's callbacks and the client
// never gets a reply (FaultTest.ClientUnblockAfterTheWorkFinishedGetsTheResult).
struct HandBacks {
  std::mutex mu;
  std::vector<BlockedJob*> ready;  // guarded by mu
  bool subscribed = false;         // set once at load, before any job exists
};
HandBacks& hand_backs() {
  static auto* h = new HandBacks;  // never destroyed: a worker may still push during exit
  return *h;
}

void wake_event_loop(void*) {}  // the loop wakes to run it, then goes through "before sleep"

void on_before_sleep(RedisModuleCtx*, RedisModuleEvent, uint64_t subevent, void*) {
  if (subevent != REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP) return;
  std::vector<BlockedJob*> jobs;
  {
    std::lock_guard<std::mutex> lock(hand_backs().mu);
    jobs.swap(hand_backs().ready);
  }
  for (BlockedJob* job : jobs) hand_back_now(job);
}

void unblock(BlockedJob* job) {
  job->handed_back.store(true, std::memory_order_release);
  HandBacks& h = hand_backs();
  if (!h.subscribed) return hand_back_now(job);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(h.mu);
    wake = h.ready.empty();
    h.ready.push_back(job);
  }
  if (wake) rm::EventLoopAddOneShot(wake_event_loop, nullptr);
}

}  // namespace

void Cancellation::set(engine::Handle h) {
  std::lock_guard<std::mutex> lock(mu_);
  handle_ = std::move(h);
  if (requested_) handle_.cancel();
}

void Cancellation::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  requested_ = true;
  if (handle_) handle_.cancel();
}

bool Cancellation::requested() {
  std::lock_guard<std::mutex> lock(mu_);
  return requested_;
}

BlockedJob* block_client(RedisModuleCtx* ctx, std::unique_ptr<BlockedJob> owned) {
  BlockedJob* job = owned.release();  // owned by the blocked client from here: free_job deletes it
  job->db = rm::GetSelectedDb(ctx);
  job->bc = rm::BlockClient(ctx, on_reply, on_unblocked, free_job, 0);
  rm::SetDisconnectCallback(job->bc, on_disconnect);
  rm::BlockedClientMeasureTimeStart(job->bc);
  live_jobs()[job->bc] = job;
  return job;
}

void complete(BlockedJob* job) {
  if (!job->has_writes()) return unblock(job);
  post_write([job](RedisModuleCtx* ctx, Writable writable) {
    {
      SelectedDb in_clients_db(ctx, job->db);
      guarded(job->command, "write", [&] { job->write(ctx, writable); });
    }
    unblock(job);
  });
}

std::unique_ptr<BlockedJob> abort_blocked(BlockedJob* job) {
  live_jobs().erase(job->bc);
  rm::AbortBlock(job->bc);
  job->bc = nullptr;
  return std::unique_ptr<BlockedJob>(job);
}

void cancel_all_jobs() {
  for (const auto& [bc, job] : live_jobs()) job->cancellation->cancel();
}

long long blocked_jobs() { return static_cast<long long>(live_jobs().size()); }

int subscribe_hand_backs(RedisModuleCtx* ctx) {
  const RedisModuleEvent before_sleep{REDISMODULE_EVENT_EVENTLOOP, 1};
  if (rm::SubscribeToServerEvent(ctx, before_sleep, on_before_sleep) != REDISMODULE_OK) return REDISMODULE_ERR;
  hand_backs().subscribed = true;
  return REDISMODULE_OK;
}

}  // namespace infer::redis
