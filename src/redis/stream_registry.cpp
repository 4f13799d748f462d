#include "redis/stream_registry.h"

#include <climits>
#include <map>
#include <string_view>
#include <utility>

#include "redis/args.h"
#include "redis/settings.h"
#include "redis/stats.h"
#include "redis/stream_writer.h"
#include "redis/write_queue.h"

namespace infer::redis {
namespace {

constexpr const char* kStreamState = "INFER.STREAMSTATE";

std::vector<std::weak_ptr<StreamWriter>>& local() {
  static auto* v = new std::vector<std::weak_ptr<StreamWriter>>;  // never destroyed: used at shutdown
  return *v;
}

// (database, key) → tokens written so far, as the last OPEN record said.
std::map<std::pair<int, std::string>, long long>& inherited() {
  static auto* m = new std::map<std::pair<int, std::string>, long long>;
  return *m;
}

// True when the stream at `key` (selected database) exists and its last entry is not a finish entry.
bool still_open(RedisModuleCtx* ctx, const std::string& key) {
  RedisModuleCallReply* r = rm::Call(ctx, "XREVRANGE", "bcccc", key.data(), key.size(), "+", "-", "COUNT", "1");
  if (!r) return false;
  bool open = false;
  if (rm::CallReplyType(r) == REDISMODULE_REPLY_ARRAY && rm::CallReplyLength(r) == 1) {
    RedisModuleCallReply* fields = rm::CallReplyArrayElement(rm::CallReplyArrayElement(r, 0), 1);
    size_t len = 0;
    const char* first = fields && rm::CallReplyLength(fields) > 0
                            ? rm::CallReplyStringPtr(rm::CallReplyArrayElement(fields, 0), &len)
                            : nullptr;
    open = !(first && std::string_view(first, len) == "finish");
  }
  rm::FreeCallReply(r);
  return open;
}

// INFER.STREAMSTATE records waiting to be sent. They go out from their own timer, after the entries
// they describe: a replica without the module refuses the unknown command, and had it shared the
// entries' MULTI, the whole transaction (the entries too) would be refused with it.
struct Record {
  int db;
  std::string key;
  long long tokens;  // -1: DONE
};
std::vector<Record>& records() {
  static auto* v = new std::vector<Record>;
  return *v;
}
bool records_scheduled = false;

void send_records(RedisModuleCtx* ctx, void*) {
  if (rm::AvoidReplicaTraffic()) {  // clients are paused: propagating now would assert (write_queue.h)
    rm::CreateTimer(ctx, 10, send_records, nullptr);
    return;
  }
  records_scheduled = false;
  std::vector<Record> batch;
  batch.swap(records());
  if (rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) return;
  for (const Record& r : batch) {
    SelectedDb in_streams_db(ctx, r.db);
    if (r.tokens < 0)
      rm::Replicate(ctx, kStreamState, "bc", r.key.data(), r.key.size(), "DONE");
    else
      rm::Replicate(ctx, kStreamState, "bcl", r.key.data(), r.key.size(), "OPEN", r.tokens);
  }
}

void queue_record(RedisModuleCtx* ctx, Record record) {
  records().push_back(std::move(record));
  if (records_scheduled) return;
  records_scheduled = true;
  rm::CreateTimer(ctx, 0, send_records, nullptr);
}

bool writing_here(int db, const std::string& key) {
  for (const auto& stream : local_streams())
    if (stream->open() && stream->db() == db && stream->key() == key) return true;
  return false;
}

}  // namespace

void track_local_stream(RedisModuleCtx* ctx, const std::shared_ptr<StreamWriter>& writer) {
  auto& v = local();
  std::erase_if(v, [](const std::weak_ptr<StreamWriter>& w) { return w.expired(); });
  v.push_back(writer);
  // Recorded before the first entry: a SHUTDOWN right after that entry still finds it in the AOF.
  queue_record(ctx, {writer->db(), writer->key(), 0});
}

std::vector<std::shared_ptr<StreamWriter>> local_streams() {
  std::vector<std::shared_ptr<StreamWriter>> alive;
  for (const auto& w : local())
    if (auto s = w.lock()) alive.push_back(std::move(s));
  return alive;
}

void note_inherited_stream(int db, const std::string& key, long long tokens) { inherited()[{db, key}] = tokens; }
void forget_inherited_stream(int db, const std::string& key) { inherited().erase({db, key}); }
void clear_inherited_streams() { inherited().clear(); }

int end_inherited_streams(RedisModuleCtx* ctx, const char* reason, bool propagate) {
  int ended = 0;
  auto streams = std::move(inherited());
  inherited().clear();
  for (const auto& [where, tokens] : streams) {
    const auto& [db, key] = where;
    // Written here and still running (the AOF was loaded again while this node streamed): it ends itself.
    if (writing_here(db, key)) continue;
    SelectedDb in_streams_db(ctx, db);
    if (!still_open(ctx, key)) continue;  // deleted, or its master ended it before it left
    if (write_stream_entry(ctx, key, settings().stream_maxlen, "finish", reason, tokens, propagate)) ++ended;
  }
  return ended;
}

bool write_stream_entry(RedisModuleCtx* ctx, const std::string& key, long long maxlen, const char* field,
                        const std::string& value, long long tokens, bool propagate, const std::string& logprobs,
                        const std::vector<std::pair<std::string, std::string>>& more) {
  const bool finish = std::string_view(field) == "finish";
  std::vector<RedisModuleString*> args;
  auto add = [&](const std::string& a) { args.push_back(rm::CreateString(ctx, a.data(), a.size())); };
  add(key);
  if (maxlen > 0) {  // 0: no cap
    add("MAXLEN");
    add("~");
    add(std::to_string(maxlen));
  }
  add("*");
  add(field);
  add(value);
  if (finish) {
    add("tokens");
    add(std::to_string(tokens));
  }
  if (!logprobs.empty()) {
    add("logprobs");
    add(logprobs);
  }
  for (const auto& [name, text] : more) {
    add(name);
    add(text);
  }
  // "!": replicated and written to the AOF (when `ctx` is freed), notified like a client's XADD.
  RedisModuleCallReply* r = rm::Call(ctx, "XADD", propagate ? "!v" : "v", args.data(), args.size());
  const bool written = r && rm::CallReplyType(r) != REDISMODULE_REPLY_ERROR;
  if (r) rm::FreeCallReply(r);
  for (RedisModuleString* a : args) rm::FreeString(ctx, a);
  if (!written) {
    rm::Log(ctx, "warning", "infer: an entry of stream '%s' could not be written", key.c_str());
    return false;
  }
  ++stats().stream_entries;
  if (propagate) queue_record(ctx, {rm::GetSelectedDb(ctx), key, finish ? -1 : tokens});
  return true;
}

int cmd_streamstate(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (!(rm::GetContextFlags(ctx) & (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING)))
    return reply_error(ctx, "INFER.STREAMSTATE is internal: only a master's replication stream and the AOF send it");
  const int db = rm::GetSelectedDb(ctx);
  const std::string key = str(argv[1]);
  long long tokens = 0;
  std::string err;
  if (argc == 4 && is_word(argv[2], "OPEN") && parse_int(argv[3], 0, LLONG_MAX, "tokens", &tokens, &err)) {
    note_inherited_stream(db, key, tokens);
  } else if (argc == 3 && is_word(argv[2], "DONE")) {
    forget_inherited_stream(db, key);
  } else {
    return reply_error(ctx, "INFER.STREAMSTATE takes key OPEN tokens or key DONE");
  }
  // Into this node's own AOF too, so that it knows the streams after a restart.
  rm::ReplicateVerbatim(ctx);
  return rm::ReplyWithSimpleString(ctx, "OK");
}

}  // namespace infer::redis
