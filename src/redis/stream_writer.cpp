#include "redis/stream_writer.h"

#include <memory>

#include "engine/logprobs_json.h"
#include "redis/args.h"
#include "redis/cluster_slots.h"
#include "redis/stats.h"
#include "redis/stream_registry.h"

namespace infer::redis {

StreamWriter::StreamWriter(const RedisModuleString* key, int db, long long maxlen,
                           std::shared_ptr<Cancellation> cancellation, bool with_logprobs)
    : key_(view(key)), db_(db), maxlen_(maxlen), with_logprobs_(with_logprobs), cancellation_(std::move(cancellation)) {}

void StreamWriter::append(const std::string& piece, const engine::TokenLogprobs* logprobs) {
  // Every token's log-probabilities go out, even while its text is held back.
  const bool logged = with_logprobs_ && logprobs;
  if (piece.empty() && !logged) return;
  const std::string json = logged ? engine::dump_logprobs_json(*logprobs) : std::string();  // outside the lock
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_pieces_++ == 0) pending_since_ = now;
    pending_ += piece;
    if (logged) {
      if (!pending_logprobs_.empty()) pending_logprobs_ += ',';
      pending_logprobs_ += json;
    }
    if (scheduled_ || (pending_pieces_ < kBatchTokens && now - pending_since_ < kBatchMs)) return;
    scheduled_ = true;
  }
  // Posted outside the lock: posting wakes the main thread, which then locks mu_ in flush(); were the
  // (lower-priority) engine thread still holding it, the main thread would wait for it to run.
  post_flush();
}

void StreamWriter::post_flush() {
  // The queued write owns one reference, so the writer outlives the request if need be.
  post_write([self = shared_from_this()](RedisModuleCtx* ctx, Writable writable) {
    if (!self->flush(ctx, writable, /*wait=*/false)) self->post_flush();
  });
}

bool StreamWriter::flush(RedisModuleCtx* ctx, Writable writable, bool wait, bool propagate) {
  std::string chunk, logprobs;
  {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (wait) {
      lock.lock();
    } else if (!lock.try_lock()) {
      // The engine thread holds the buffer (it runs at a lower priority and may have been preempted
      // inside its few instructions): never wait for it on the main thread, come back later. Order
      // holds: finish() flushes with wait before its entry, and a flush after it finds nothing.
      return false;
    }
    chunk.swap(pending_);
    logprobs.swap(pending_logprobs_);
    tokens_written_ += pending_pieces_;
    pending_pieces_ = 0;
    scheduled_ = false;
  }
  if (finished_ || (chunk.empty() && logprobs.empty()) || writable != Writable::Yes) return true;
  if (!logprobs.empty()) logprobs = '[' + logprobs + ']';
  SelectedDb in_clients_db(ctx, db_);
  if (may_write(ctx, propagate))
    write_stream_entry(ctx, key_, maxlen_, "text", chunk, tokens_written_, propagate, logprobs);
  return true;
}

bool StreamWriter::may_write(RedisModuleCtx* ctx, bool propagate) {
  if (!moved_.empty()) return false;
  bool migrating = false;
  // Not `asked`: the entries go through RM_Call, which routes like a client without ASKING, so a
  // stream begun on a node that imports its slot ends with the redirection.
  moved_ = cluster_write_refusal(ctx, key_, &migrating);
  if (moved_.empty() && migrating) {
    // The key is still here but may leave with the next MIGRATE: end the stream while readers can see it.
    write_stream_entry(ctx, key_, maxlen_, "finish", "moved", tokens_written_, propagate);
    moved_ = "TRYAGAIN the slot of STREAM '" + key_ + "' is migrating: the stream ended with 'finish moved'";
  } else if (!moved_.empty()) {
    rm::Log(ctx, "warning", "infer: stream '%s' stops without its finish entry: its slot moved (%s)", key_.c_str(),
            moved_.c_str());
  }
  if (moved_.empty()) return true;
  finished_ = true;
  if (cancellation_) cancellation_->cancel();
  return false;
}

void StreamWriter::finish(RedisModuleCtx* ctx, Writable writable, const char* reason, long long n_tokens,
                          const std::vector<std::pair<std::string, std::string>>& fields) {
  if (finished_) return;
  flush(ctx, writable, /*wait=*/true);  // the engine has stopped appending: the lock is free or about to be
  if (finished_) return;  // the flush found the slot moving or gone
  finished_ = true;
  if (writable != Writable::Yes) {
    rm::Log(ctx, "warning", "infer: stream '%s' ends without its finish entry (%s): this node became a replica",
            key_.c_str(), reason);
    return;
  }
  SelectedDb in_clients_db(ctx, db_);
  if (may_write(ctx, /*propagate=*/true)) write_stream_entry(ctx, key_, maxlen_, "finish", reason, n_tokens, true, {}, fields);
}

bool StreamWriter::end_now(RedisModuleCtx* ctx, const char* reason, bool propagate) {
  if (finished_) return false;
  stop_generation();
  flush(ctx, Writable::Yes, /*wait=*/true, propagate);  // the engine thread holds the lock a few instructions at most
  if (finished_) return false;
  finished_ = true;
  SelectedDb in_clients_db(ctx, db_);
  return may_write(ctx, propagate) &&
         write_stream_entry(ctx, key_, maxlen_, "finish", reason, tokens_written_, propagate);
}

void StreamWriter::stop_generation() {
  if (cancellation_) cancellation_->cancel();
}

}  // namespace infer::redis
