// Appends a generation's text to a Redis Stream while it runs (INFER.GENERATE ... STREAM key).
//
// The engine thread only appends pieces to a buffer under a small mutex and, once a batch is ready
// (kBatchTokens pieces, or the oldest buffered piece is kBatchMs old) and no flush is pending, posts one
// to the module's write queue (write_queue.h); the flush runs on the main thread and writes everything
// buffered so far as ONE entry (so the main thread is touched once per batch, never per token;
// spec §3.2, DESIGN invariant 5). The final entry is written from the queue too, after the last flush,
// whether or not the client is still there. Through the queue, entries keep their order, wait out client
// pauses, and are never written on a node that became a replica. Entries go through RM_Call("XADD", "!")
// so they are trimmed, replicated, written to the AOF and notified like a client's XADD; each also
// records the stream as open (or done) for replicas and the AOF (stream_registry.h), so that the
// stream ends with a `finish` entry after a SHUTDOWN, a restart or a failover too.
//
// Entry fields: `text <chunk>`; the last entry is `finish <reason> tokens <n>` (plus `tool_calls <json>`
// when the reply has calls, tool_reply.h). With LOGPROBS a text entry also has `logprobs <json>`: a JSON
// array with one object per token generated since the entry before (logprobs_json.h), including tokens
// whose text is still held back (then `text` may be empty). In a cluster, when the
// key's slot starts migrating away the stream ends at once with `finish moved` and the generation is
// cancelled (the key may leave with the next MIGRATE); when the slot is already gone nothing more can
// be written here, the server log says so and moved() gives the redirection for the reply.
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "redis/blocked_call.h"
#include "redis/module_api.h"
#include "redis/write_queue.h"

namespace infer::redis {

class StreamWriter : public std::enable_shared_from_this<StreamWriter> {
 public:
  // Main thread. `key` is copied; `db` is the client's selected database; `cancellation` stops the
  // generation when the stream cannot go on (its slot moved).
  // `with_logprobs`: entries carry the tokens' log-probabilities (LOGPROBS).
  StreamWriter(const RedisModuleString* key, int db, long long maxlen, std::shared_ptr<Cancellation> cancellation,
               bool with_logprobs = false);

  // Engine thread: buffer one token's piece of text (and its log-probabilities, when the writer was made
  // with them and `logprobs` is not null) and make sure a flush is queued.
  void append(const std::string& piece, const engine::TokenLogprobs* logprobs = nullptr);

  // Main thread, from the write queue (`ctx`: the queue's context): write what is buffered, then the
  // final entry. On a node that became a replica nothing is written and the server log says so.
  // Idempotent.
  // `fields`: more field/value pairs for the final entry (tool_calls).
  void finish(RedisModuleCtx* ctx, Writable writable, const char* reason, long long n_tokens,
              const std::vector<std::pair<std::string, std::string>>& fields = {});

  // Main thread: ends the stream now with `finish <reason> tokens <n>` (n: the tokens written so far)
  // and stops the generation (SHUTDOWN). `propagate`: as in write_stream_entry (stream_registry.h).
  // Returns true when it wrote the finish entry; false when the stream had ended already.
  bool end_now(RedisModuleCtx* ctx, const char* reason, bool propagate);
  // Asks the generation to stop (this node became a replica: its streams are the new master's to end).
  void stop_generation();

  const std::string& key() const { return key_; }
  int db() const { return db_; }
  // Main thread: false once the final entry was written (or could not be).
  bool open() const { return !finished_; }
  // Main thread: why the stream stopped early ("MOVED 1234 host:port", "ASK ..."), or "".
  const std::string& moved() const { return moved_; }

 private:
  // Main thread, from the write queue: writes what is buffered. With wait false it gives up (false)
  // instead of waiting when the engine thread holds the buffer.
  bool flush(RedisModuleCtx* ctx, Writable writable, bool wait, bool propagate = true);
  void post_flush();
  // Main thread, with the writer's database selected (flush and finish select it). may_write is false
  // (and the stream is ended or abandoned) when its slot is moving or gone.
  bool may_write(RedisModuleCtx* ctx, bool propagate);

  std::string key_;
  int db_;
  long long maxlen_;
  bool with_logprobs_;
  std::mutex mu_;
  static constexpr int kBatchTokens = 16;
  static constexpr std::chrono::milliseconds kBatchMs{10};
  std::string pending_;     // guarded by mu_
  std::string pending_logprobs_;  // guarded by mu_: the JSON objects of the tokens buffered, comma-separated
  int pending_pieces_ = 0;  // guarded by mu_
  std::chrono::steady_clock::time_point pending_since_;  // guarded by mu_
  bool scheduled_ = false;  // guarded by mu_
  bool finished_ = false;   // main thread only
  std::string moved_;       // main thread only
  long long tokens_written_ = 0;    // main thread only: for `finish moved|shutdown tokens <n>`
  std::shared_ptr<Cancellation> cancellation_;
};

}  // namespace infer::redis
