#include "redis/stream_writer.h"

#include <algorithm>
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
  // StreamAdd on the key directly (no command dispatch through RM_Call), then what a client's XADD
  // would do besides: trim, wake XREAD BLOCK readers (CloseKey), replicate, notify. A fresh context per
  // batch: what Replicate queues goes out when the context is freed, and the database is the client's.
  RedisModuleCtx* ctx = rm::GetDetachedThreadSafeContext(g_module_ctx);
  rm::SelectDb(ctx, db_);
  std::vector<RedisModuleString*> fields;
  auto make = [&](const std::string& a) { return rm::CreateString(ctx, a.data(), a.size()); };
  RedisModuleString* key = make(key_);
  fields.push_back(make(f1));
  fields.push_back(make(v1));
  if (f2) {
    fields.push_back(make(f2));
    fields.push_back(make(v2));
  }
  RedisModuleKey* k = rm::OpenKey(ctx, key, REDISMODULE_READ | REDISMODULE_WRITE);
  const int type = rm::KeyType(k);
  RedisModuleStreamID id{};
  bool added = false;
  long long trimmed = 0, length = 0;
  // The key may have been replaced by another type since the command checked it: then, like XADD,
  // write nothing.
  if ((type == REDISMODULE_KEYTYPE_EMPTY || type == REDISMODULE_KEYTYPE_STREAM) &&
      rm::StreamAdd(k, REDISMODULE_STREAM_ADD_AUTOID, &id, fields.data(), static_cast<int64_t>(fields.size() / 2)) ==
          REDISMODULE_OK) {
    added = true;
    if (maxlen_ > 0) trimmed = std::max(0LL, rm::StreamTrimByLength(k, REDISMODULE_STREAM_TRIM_APPROX, maxlen_));
    length = static_cast<long long>(rm::ValueLength(k));
  }
  rm::CloseKey(k);  // wakes clients blocked in XREAD on the key
  if (added) {
    const std::string id_text = std::to_string(id.ms) + "-" + std::to_string(id.seq);
    // Replicas and the AOF get the entry with its id and the exact length the approximate trim left.
    if (maxlen_ > 0 && f2)
      rm::Replicate(ctx, "XADD", "scclcssss", key, "MAXLEN", "=", length, id_text.c_str(), fields[0], fields[1],
                    fields[2], fields[3]);
    else if (maxlen_ > 0)
      rm::Replicate(ctx, "XADD", "scclcss", key, "MAXLEN", "=", length, id_text.c_str(), fields[0], fields[1]);
    else if (f2)
      rm::Replicate(ctx, "XADD", "scssss", key, id_text.c_str(), fields[0], fields[1], fields[2], fields[3]);
    else
      rm::Replicate(ctx, "XADD", "scss", key, id_text.c_str(), fields[0], fields[1]);
    rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_STREAM, "xadd", key);
    if (trimmed > 0) rm::NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_STREAM, "xtrim", key);
    ++stats().stream_entries;
  }
  for (RedisModuleString* f : fields) rm::FreeString(ctx, f);
  rm::FreeString(ctx, key);
  rm::FreeThreadSafeContext(ctx);
}

}  // namespace infer::redis
