#include "redis/stream_writer.h"

#include <vector>

#include "redis/args.h"
#include "redis/stats.h"

namespace infer::redis {
namespace {
RedisModuleCtx* g_module_ctx = nullptr;  // detached thread-safe context made in OnLoad; never freed
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

void StreamWriter::flush_event(void* user_data) {
  std::unique_ptr<std::shared_ptr<StreamWriter>> ref(static_cast<std::shared_ptr<StreamWriter>*>(user_data));
  try {
    MainThreadTimer timer("infer.generate stream flush");
    if (!(*ref)->flush(/*wait=*/false)) {
      // The engine thread holds the buffer (it runs at a lower priority and may have been preempted
      // inside its few instructions): never wait for it on the main thread, come back next turn.
      if (rm::EventLoopAddOneShot(flush_event, ref.get()) == REDISMODULE_OK) ref.release();
    }
  } catch (...) {
    // Nothing can be reported from an event callback; the final entry still says how it ended.
  }
}

bool StreamWriter::flush(bool wait) {
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
  xadd("text", chunk);
  return true;
}

void StreamWriter::finish(const char* reason, long long n_tokens) {
  if (finished_) return;
  flush(/*wait=*/true);  // the engine has stopped appending: the lock is free or about to be
  xadd("finish", reason, "tokens", std::to_string(n_tokens));
  finished_ = true;
}

void StreamWriter::xadd(const char* f1, const std::string& v1, const char* f2, const std::string& v2) {
  // A fresh context per batch: replication queued by RM_Call("!") goes out when it is freed, and the
  // database is the requesting client's.
  RedisModuleCtx* ctx = rm::GetDetachedThreadSafeContext(g_module_ctx);
  rm::SelectDb(ctx, db_);
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
  RedisModuleCallReply* r = rm::Call(ctx, "XADD", "!v", args.data(), args.size());
  if (r) {
    if (rm::CallReplyType(r) != REDISMODULE_REPLY_ERROR) ++stats().stream_entries;
    rm::FreeCallReply(r);
  }
  for (RedisModuleString* a : args) rm::FreeString(ctx, a);
  rm::FreeThreadSafeContext(ctx);
}

}  // namespace infer::redis
