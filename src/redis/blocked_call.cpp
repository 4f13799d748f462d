#include "redis/blocked_call.h"

#include <exception>
#include <string>
#include <unordered_map>

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

int on_reply(RedisModuleCtx* ctx, RedisModuleString**, int) {
  auto* job = static_cast<BlockedJob*>(rm::GetBlockedClientPrivateData(ctx));
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

// Only CLIENT UNBLOCK gets here: clients are blocked without a Redis timeout.
int on_unblocked(RedisModuleCtx* ctx, RedisModuleString**, int) {
  BlockedJob* job = job_of(rm::GetBlockedClientHandle(ctx));
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

void on_disconnect(RedisModuleCtx* ctx, RedisModuleBlockedClient* bc) {
  BlockedJob* job = job_of(bc);
  if (!job) return;
  if (job->handed_back.load(std::memory_order_acquire)) {
    // The work is done and Redis holds the client's unblocking. A CLIENT UNBLOCK that comes now
    // (Redis 7.0) calls neither on_unblocked nor, later, on_reply, but comes here with the client still
    // connected: it gets its result now. A client that did disconnect reads nothing.
    guarded(job->command, "reply", [&] {
      settle_once(job);
      job->reply(ctx);
    });
    job->client_gone = true;
    return;
  }
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

void unblock(BlockedJob* job) {
  job->handed_back.store(true, std::memory_order_release);
  rm::BlockedClientMeasureTimeEnd(job->bc);
  rm::UnblockClient(job->bc, job);  // never NULL: free_job runs and deletes the job
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

}  // namespace infer::redis
