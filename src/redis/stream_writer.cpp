#include "redis/stream_writer.h"

#include <memory>
#include <vector>

#include "redis/args.h"
#include "redis/stats.h"

namespace infer::redis {
namespace {
RedisModuleCtx* g_module_ctx = nullptr;  // made in OnLoad, never freed: names the module to CreateTimer
}

void StreamWriter::init(RedisModuleCtx* onload_ctx) {
  if (!g_module_ctx) g_module_ctx = rm::GetDetachedThreadSafeContext(onload_ctx);
}

StreamWriter::StreamWriter(const RedisModuleString* key, int db, long long maxlen)
    : key_(view(key)), db_(db), maxlen_(maxlen) {}

void StreamWriter::append(const std::string& piece) {
  if (piece.empty()) return;
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_pieces_++ == 0) pending_since_ = now;
    pending_ += piece;
    if (scheduled_ || (pending_pieces_ < kBatchTokens && now - pending_since_ < kBatchMs)) return;
    scheduled_ = true;
  }
  // Scheduled outside the lock: the call wakes the main thread, which then locks mu_ in flush(); were
  // the (lower-priority) engine thread still holding it, the main thread would wait for it to run.
  // The event owns one reference, so the writer outlives the request if need be.
  auto* ref = new std::shared_ptr<StreamWriter>(shared_from_this());
  if (rm::EventLoopAddOneShot(flush_event, ref) != REDISMODULE_OK) {
    delete ref;  // the final flush will write what is buffered
    std::lock_guard<std::mutex> lock(mu_);
    scheduled_ = false;
  }
}

// Why a timer: the event-loop callback has no context, and what RM_Call("!") queues for replication and
// the AOF is only sent when a non-thread-safe context is freed (a detached thread-safe context left it
// queued, and Redis 7.0 then asserted in handleClientsBlockedOnKeys with the AOF on). A timer callback
// gets such a context.
void StreamWriter::flush_event(void* user_data) {
  std::unique_ptr<std::shared_ptr<StreamWriter>> ref(static_cast<std::shared_ptr<StreamWriter>*>(user_data));
  try {
    rm::CreateTimer(g_module_ctx, 0, flush_timer, ref.get());
    ref.release();  // the timer owns it now
  } catch (...) {
  }
}

void StreamWriter::flush_timer(RedisModuleCtx* ctx, void* user_data) {
  std::unique_ptr<std::shared_ptr<StreamWriter>> ref(static_cast<std::shared_ptr<StreamWriter>*>(user_data));
  try {
    MainThreadTimer timer("infer.generate stream flush");
    if (!(*ref)->flush(ctx, /*wait=*/false)) {
      // The engine thread holds the buffer (it runs at a lower priority and may have been preempted
      // inside its few instructions): never wait for it on the main thread, come back next turn.
      rm::CreateTimer(ctx, 0, flush_timer, ref.get());
      ref.release();
    }
  } catch (...) {
    // Nothing can be reported from a timer; the final entry still says how it ended.
  }
}

bool StreamWriter::flush(RedisModuleCtx* ctx, bool wait) {
  std::string chunk;
  {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (wait) {
      lock.lock();
    } else if (!lock.try_lock()) {
      return false;
    }
    chunk.swap(pending_);
    pending_pieces_ = 0;
    scheduled_ = false;
  }
  if (finished_ || chunk.empty()) return true;
  xadd(ctx, "text", chunk);
  return true;
}

void StreamWriter::finish(RedisModuleCtx* ctx, const char* reason, long long n_tokens) {
  if (finished_) return;
  if (!ctx) {  // a callback without a context: write from a timer's instead
    struct Later {
      std::shared_ptr<StreamWriter> writer;
      std::string reason;
      long long n_tokens;
    };
    auto* later = new Later{shared_from_this(), reason, n_tokens};
    rm::CreateTimer(g_module_ctx, 0, [](RedisModuleCtx* timer_ctx, void* data) {
      std::unique_ptr<Later> l(static_cast<Later*>(data));
      try {
        l->writer->finish(timer_ctx, l->reason.c_str(), l->n_tokens);
      } catch (...) {
      }
    }, later);
    return;
  }
  flush(ctx, /*wait=*/true);  // the engine has stopped appending: the lock is free or about to be
  xadd(ctx, "finish", reason, "tokens", std::to_string(n_tokens));
  finished_ = true;
}

void StreamWriter::xadd(RedisModuleCtx* ctx, const char* f1, const std::string& v1, const char* f2,
                        const std::string& v2) {
  // In the writer's database (the requesting client's), then back: `ctx` may be a reply context.
  const int db = rm::GetSelectedDb(ctx);
  if (db != db_) rm::SelectDb(ctx, db_);
  std::vector<RedisModuleString*> args;
  auto add = [&](const std::string& a) { args.push_back(rm::CreateString(ctx, a.data(), a.size())); };
  add(key_);
  if (maxlen_ > 0) {  // 0: no cap
    add("MAXLEN");
    add("~");
    add(std::to_string(maxlen_));
  }
  add("*");
  add(f1);
  add(v1);
  if (f2) {
    add(f2);
    add(v2);
  }
  // "!": replicated and written to the AOF (when `ctx` is freed), notified like a client's XADD.
  RedisModuleCallReply* r = rm::Call(ctx, "XADD", "!v", args.data(), args.size());
  if (r) {
    if (rm::CallReplyType(r) != REDISMODULE_REPLY_ERROR) ++stats().stream_entries;
    rm::FreeCallReply(r);
  }
  for (RedisModuleString* a : args) rm::FreeString(ctx, a);
  if (db != db_) rm::SelectDb(ctx, db);
}

}  // namespace infer::redis
