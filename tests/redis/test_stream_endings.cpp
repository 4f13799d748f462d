// Every generation stream ends with a `finish` entry, even when its node stops or loses its role:
// SHUTDOWN writes `finish shutdown` (kept by the RDB saved at shutdown, or written at the next start
// from the AOF's record of open streams), and after a failover the promoted replica writes
// `finish failover` to the streams its old master left open, which a reader blocked on the promoted
// node sees at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

// The fields of the stream's last entry ("[finish, shutdown, tokens, 37]"), or "" when empty.
std::string last_entry(redisContext* c, const std::string& key) {
  Reply r = command(c, {"XREVRANGE", key, "+", "-", "COUNT", "1"});
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0) return "";
  return show(r->element[0]->element[1]);
}

long long xlen(redisContext* c, const std::string& key) { return std::atoll(run(c, {"XLEN", key}).c_str()); }

// A directory that outlives one server, so that the next one starts from its files.
struct DataDir {
  DataDir() {
    char tmpl[] = "/tmp/infer-stream-endings-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~DataDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path(), "MODEL-DIR", stories_model_dir()}; }

// Starts a long STREAM generation on `c` (not waiting for its reply) and returns once `key` has an entry.
void start_streaming(redisContext* c, redisContext* observer, const std::string& key) {
  send_command(c, {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "2000", "TEMP", "1", "STREAM", key});
  ASSERT_TRUE(wait_until([&] { return xlen(observer, key) > 0; }));
}

// SHUTDOWN while a generation streams, then a restart from the files it left: the stream's last entry
// is `finish shutdown`, whichever persistence kept it. With `paused`, writes are paused first (as when
// a shutdown waits for lagging replicas): the entries then change the data set without propagating.
void shutdown_and_restart(const std::vector<std::string>& persistence, bool paused) {
  INFER_REQUIRE_DIR(models_dir());
  DataDir data;
  std::vector<std::string> server_args = persistence;
  server_args.insert(server_args.end(), {"--dir", data.path});
  std::string first_log;
  {
    RedisServer server({.module_args = module_args(), .server_args = server_args});
    RedisConn admin = server.connect(), generating = server.connect();
    // The first entry comes after 16 of 2,000 tokens: SHUTDOWN (or the pause) reaches the main
    // thread long before the niced engine threads could finish.
    start_streaming(generating.get(), admin.get(), "s:live");
    if (paused) {
      ASSERT_EQ(run(admin.get(), {"CLIENT", "PAUSE", "20000", "WRITE"}), "OK");
    }
    send_command(admin.get(), {"SHUTDOWN"});
    ASSERT_TRUE(wait_until([&] { return !server.alive(); })) << server.log();
    first_log = server.log();
  }
  EXPECT_NE(first_log.find("infer: SHUTDOWN ended 1 open stream with 'finish shutdown'"), std::string::npos)
      << first_log;
  RedisServer again({.module_args = module_args(), .server_args = server_args});
  RedisConn c = again.connect();
  EXPECT_TRUE(wait_until([&] { return last_entry(c.get(), "s:live").rfind("[finish, shutdown, tokens, ", 0) == 0; }))
      << last_entry(c.get(), "s:live") << "\n" << again.log();
  // Exactly one finish entry: the stream's entries before it are text.
  Reply all = command(c.get(), {"XRANGE", "s:live", "-", "+"});
  ASSERT_TRUE(all && all->type == REDIS_REPLY_ARRAY && all->elements >= 2);
  for (size_t i = 0; i + 1 < all->elements; ++i) EXPECT_EQ(show(all->element[i]->element[1]).rfind("[text, ", 0), 0u);
  // Nothing is left to end at the next start.
  EXPECT_EQ(run(c.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "3", "STREAM", "s:next"}).empty(),
            false);
  EXPECT_EQ(last_entry(c.get(), "s:next").rfind("[finish, length, tokens, 3]", 0), 0u) << last_entry(c.get(), "s:next");
}

TEST(StreamEndings, ShutdownEndsTheStreamAndTheRdbKeepsIt) { shutdown_and_restart({"--save", "3600 1"}, false); }

TEST(StreamEndings, ShutdownEndsTheStreamAndTheAofKeepsIt) {
  shutdown_and_restart({"--appendonly", "yes", "--save", ""}, false);
}

TEST(StreamEndings, ShutdownWithWritesPausedEndsTheStream) {
  shutdown_and_restart({"--save", "3600 1"}, true);
  shutdown_and_restart({"--appendonly", "yes", "--save", ""}, true);
}

// The record of open streams is for the replication stream and the AOF only.
TEST(StreamEndings, StreamStateIsRefusedFromClients) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = module_args()});
  RedisConn c = server.connect();
  EXPECT_EQ(run(c.get(), {"INFER.STREAMSTATE", "s", "OPEN", "3"}),
            "(error) ERR INFER.STREAMSTATE is internal: only a master's replication stream and the AOF send it");
  EXPECT_EQ(run(c.get(), {"EXISTS", "s"}), "0");
}

// Starts a STREAM generation on the master and pauses its writes (as a FAILOVER does anyway) while the
// stream is open, then waits until the replica has all of it. Tiny models generate thousands of tokens
// a second, so a generation that finished before the pause is retried under a new key. Returns the key.
std::string open_stream_with_writes_paused(redisContext* generating, redisContext* m, redisContext* r) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    const std::string key = "s:live" + std::to_string(attempt);
    start_streaming(generating, m, key);
    EXPECT_EQ(run(m, {"CLIENT", "PAUSE", "20000", "WRITE"}), "OK");
    if (last_entry(m, key).rfind("[finish, ", 0) != 0) {
      EXPECT_TRUE(wait_until([&] { return last_entry(r, key) == last_entry(m, key); }));
      return key;
    }
    EXPECT_EQ(run(m, {"CLIENT", "UNPAUSE"}), "OK");
    EXPECT_TRUE(receive(generating));
  }
  ADD_FAILURE() << "every generation finished before the pause";
  return "";
}

// FAILOVER while the master streams: a reader blocked on the replica gets `finish failover` from it
// once it is promoted; the demoted master writes nothing more and its client gets an answer.
TEST(StreamEndings, FailoverEndsTheStreamOnThePromotedReplica) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer master({.module_args = module_args(), .server_args = {"--repl-diskless-sync-delay", "0"}});
  RedisServer replica({.module_args = module_args(),
                       .server_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}});
  RedisConn m = master.connect(), r = replica.connect(), generating = master.connect(), reader = replica.connect();
  ASSERT_TRUE(wait_until([&] { return run(r.get(), {"INFO", "replication"}).find("master_link_status:up") != std::string::npos; }));
  const std::string key = open_stream_with_writes_paused(generating.get(), m.get(), r.get());
  ASSERT_FALSE(key.empty());

  ASSERT_EQ(run(m.get(), {"FAILOVER"}), "OK");
  const auto t0 = Clock::now();
  // Read from the replica as a consumer would, from the start, until a finish entry comes.
  std::string last_id = "0", finish;
  while (finish.empty() && Clock::now() - t0 < std::chrono::seconds(20)) {
    Reply got = command(reader.get(), {"XREAD", "BLOCK", "20000", "STREAMS", key, last_id});
    ASSERT_TRUE(got) << replica.log();
    if (got->type != REDIS_REPLY_ARRAY) continue;
    const redisReply* entries = got->element[0]->element[1];
    for (size_t i = 0; i < entries->elements; ++i) {
      last_id = entries->element[i]->element[0]->str;
      const std::string fields = show(entries->element[i]->element[1]);
      if (fields.rfind("[finish, ", 0) == 0) finish = fields;
    }
  }
  const long long ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  std::printf("[ finish after FAILOVER: %s in %lld ms ]\n", finish.c_str(), ms);
  EXPECT_EQ(finish.rfind("[finish, failover, tokens, ", 0), 0u) << finish << "\n" << replica.log();
  EXPECT_LT(ms, 10000);
  EXPECT_NE(run(r.get(), {"ROLE"}).find("master"), std::string::npos);

  // The old master follows the new one: it ends with the same single finish entry.
  ASSERT_EQ(run(m.get(), {"CLIENT", "UNPAUSE"}), "OK");
  Reply reply = receive(generating.get());
  ASSERT_TRUE(reply) << master.log();
  EXPECT_EQ(show(reply.get()).rfind("(error) ", 0), 0u) << show(reply.get());
  ASSERT_TRUE(wait_until([&] { return last_entry(m.get(), key) == last_entry(r.get(), key); }))
      << last_entry(m.get(), key);
  Reply all = command(r.get(), {"XRANGE", key, "-", "+"});
  ASSERT_TRUE(all && all->type == REDIS_REPLY_ARRAY);
  int finishes = 0;
  for (size_t i = 0; i < all->elements; ++i) finishes += show(all->element[i]->element[1]).rfind("[finish, ", 0) == 0;
  EXPECT_EQ(finishes, 1);
  // The promoted node streams itself, and its own streams end as usual.
  EXPECT_FALSE(run(r.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "3", "STREAM", "s:new"}).empty());
  EXPECT_EQ(last_entry(r.get(), "s:new"), "[finish, length, tokens, 3]");
}

// REPLICAOF NO ONE on the replica (the old master keeps running): the promoted node ends the stream.
TEST(StreamEndings, PromotedReplicaEndsTheStreamItsMasterLeftOpen) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer master({.module_args = module_args(), .server_args = {"--repl-diskless-sync-delay", "0"}});
  RedisServer replica({.module_args = module_args(),
                       .server_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}});
  RedisConn m = master.connect(), r = replica.connect(), generating = master.connect();
  ASSERT_TRUE(wait_until([&] { return run(r.get(), {"INFO", "replication"}).find("master_link_status:up") != std::string::npos; }));
  const std::string key = open_stream_with_writes_paused(generating.get(), m.get(), r.get());
  ASSERT_FALSE(key.empty());
  ASSERT_EQ(run(r.get(), {"REPLICAOF", "NO", "ONE"}), "OK");
  EXPECT_TRUE(wait_until([&] { return last_entry(r.get(), key).rfind("[finish, failover, tokens, ", 0) == 0; }))
      << last_entry(r.get(), key) << "\n" << replica.log();
  EXPECT_NE(replica.log().find("infer: promoted to master: ended 1 stream"), std::string::npos) << replica.log();
}

}  // namespace
}  // namespace infer::test
