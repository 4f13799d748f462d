// Faults while INFER.* commands run, against a real redis-server with the module: the client killed,
// CLIENT KILL, CLIENT UNBLOCK, CLIENT PAUSE WRITE with the AOF on, REPLICAOF and back, DEBUG RELOAD,
// BGSAVE, FLUSHALL, INFER.UNLOAD. The server must survive each one, leave no blocked job or pending
// write behind, write nothing during a pause, and end every stream with its finish entry (or log why
// not). The named tests reproduce the crashes of the issue "the module must never take Redis down";
// RandomFaults runs seeded random pairs of (command, fault): INFER_FAULT_SEED / INFER_FAULT_ROUNDS
// reproduce or lengthen a run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A port nothing listens on (privileged): REPLICAOF it demotes the node without a sync.
const std::string kDeadPort = "1";

bool wait_for(const std::function<bool()>& done, milliseconds timeout = milliseconds(20000)) {
  const auto end = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

long long info_field(redisContext* c, const std::string& section, const std::string& field) {
  const std::string info = show(command(c, {"INFO", section}).get());
  const size_t p = info.find("\n" + field + ":");
  return p == std::string::npos ? -1 : std::atoll(info.c_str() + p + field.size() + 2);
}

// The fields of the stream's last entry ("[finish, cancelled, tokens, 37]"), or "" when empty.
std::string last_entry(redisContext* c, const std::string& key) {
  Reply r = command(c, {"XREVRANGE", key, "+", "-", "COUNT", "1"});
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0) return "";
  return show(r->element[0]->element[1]);
}

bool finished(redisContext* c, const std::string& key) { return last_entry(c, key).rfind("[finish,", 0) == 0; }

// A text that tokenises off the main thread for a while (hundreds of milliseconds).
std::string long_text(size_t bytes) {
  std::string t;
  while (t.size() < bytes) t += "Once upon a time, there was a little girl named Lily who loved the park. ";
  return t;
}

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { INFER_REQUIRE_DIR(models_dir()); }

  void start(std::vector<std::string> server_args = {}) {
    server_args.insert(server_args.end(), {"--enable-debug-command", "yes"});
    server_ = std::make_unique<RedisServer>(RedisServerOptions{
        .module_args = {"MODEL", "stories", stories_model_path(), "MODEL-DIR", stories_model_dir()},
        .server_args = server_args});
    admin_ = server_->connect();
  }
  std::string run(const std::vector<std::string>& argv) { return show(command(admin_.get(), argv).get()); }

  // The server answers, and once idle holds no blocked job, pending write or running request.
  void expect_alive_and_idle() {
    ASSERT_TRUE(server_->alive()) << server_->log();
    ASSERT_EQ(run({"PING"}), "PONG") << server_->log();
    EXPECT_TRUE(wait_for([&] {
      return info_field(admin_.get(), "infer", "infer_blocked_clients") == 0 &&
             info_field(admin_.get(), "infer", "infer_writes_deferred") == 0;
    })) << run({"INFO", "infer"});
    EXPECT_TRUE(wait_for([&] {
      return run({"INFO", "infer"}).find("infer_model_stories:queued=0,running=0,") != std::string::npos;
    })) << run({"INFO", "infer"});
    // Idle, every used KV page is one the prefix cache holds: none leaked by a request.
    EXPECT_TRUE(wait_for([&] {
      return info_field(admin_.get(), "infer", "infer_kv_pages_used") ==
             info_field(admin_.get(), "infer", "infer_kv_pages_cached");
    })) << run({"INFO", "infer"});
  }

  // Starts a STREAM generation on `c` and returns once its stream has its first entry.
  void start_streaming(redisContext* c, const std::string& key) {
    run({"DEL", key});
    send_command(c, {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "2000", "TEMP", "1", "STREAM", key});
    ASSERT_TRUE(wait_for([&] { return std::atoll(run({"XLEN", key}).c_str()) > 0; })) << server_->log();
  }

  std::unique_ptr<RedisServer> server_;
  RedisConn admin_;
};

TEST_F(FaultTest, StreamOfAClosedConnectionEndsWithFinish) {
  start();
  {
    RedisConn gone = server_->connect();
    start_streaming(gone.get(), "s:closed");
  }  // the connection closes while the generation runs
  EXPECT_TRUE(wait_for([&] { return finished(admin_.get(), "s:closed"); })) << last_entry(admin_.get(), "s:closed");
  expect_alive_and_idle();
}

TEST_F(FaultTest, StreamOfAKilledClientEndsWithFinish) {
  start();
  RedisConn victim = server_->connect();
  const std::string id = std::to_string(command(victim.get(), {"CLIENT", "ID"})->integer);
  start_streaming(victim.get(), "s:killed");
  EXPECT_EQ(run({"CLIENT", "KILL", "ID", id}), "1");
  EXPECT_TRUE(wait_for([&] { return finished(admin_.get(), "s:killed"); }));
  expect_alive_and_idle();
}

TEST_F(FaultTest, StreamOfAnUnblockedClientEndsWithFinishCancelled) {
  start();
  for (const char* how : {"TIMEOUT", "ERROR"}) {
    SCOPED_TRACE(how);
    RedisConn victim = server_->connect();
    const std::string id = std::to_string(command(victim.get(), {"CLIENT", "ID"})->integer);
    const std::string key = std::string("s:unblocked:") + how;
    start_streaming(victim.get(), key);
    const std::string unblocked = run({"CLIENT", "UNBLOCK", id, how});
    Reply r = receive(victim.get());
    ASSERT_TRUE(r) << server_->log();
    EXPECT_TRUE(wait_for([&] { return finished(admin_.get(), key); }));
    if (unblocked == "1") {
      // With ERROR, Redis replies itself and the module sees a disconnect; either way the work stops.
      EXPECT_EQ(show(r.get()), how == std::string("ERROR") ? "(error) UNBLOCKED client unblocked via CLIENT UNBLOCK"
                                                           : "(error) UNBLOCKED client unblocked; generation cancelled");
      EXPECT_EQ(last_entry(admin_.get(), key).rfind("[finish, cancelled, tokens, ", 0), 0u) << last_entry(admin_.get(), key);
    }
    EXPECT_EQ(show(command(victim.get(), {"PING"}).get()), "PONG");
  }
  expect_alive_and_idle();
}

// A node demoted while it streams (REPLICAOF, as Sentinel does) writes nothing more as a replica; it
// survives, and back as a master it serves again.
TEST_F(FaultTest, ReplicaofWhileStreamingNeitherCrashesNorWritesAsAReplica) {
  start();
  RedisConn victim = server_->connect();
  start_streaming(victim.get(), "s:demoted");
  ASSERT_EQ(run({"REPLICAOF", "127.0.0.1", kDeadPort}), "OK");
  Reply r = receive(victim.get());  // Redis unblocks clients of a demoted master with an error
  EXPECT_TRUE(!r || r->type == REDIS_REPLY_ERROR) << show(r.get());
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(server_->alive()) << server_->log();
  ASSERT_EQ(run({"REPLICAOF", "NO", "ONE"}), "OK");
  expect_alive_and_idle();
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4", "TEMP", "0", "STREAM", "s:after"}).empty(),
            false);
  EXPECT_TRUE(finished(admin_.get(), "s:after"));
}

// With the AOF on, a write propagated during CLIENT PAUSE WRITE asserts in Redis 7.0: the module's writes
// wait for the pause to end, in order.
TEST_F(FaultTest, StreamWritesWaitOutClientPauseWrite) {
  start({"--appendonly", "yes"});
  RedisConn gen = server_->connect();
  start_streaming(gen.get(), "s:paused");
  ASSERT_EQ(run({"CLIENT", "PAUSE", "600", "WRITE"}), "OK");
  const auto paused_at = Clock::now();
  std::this_thread::sleep_for(milliseconds(50));
  const long long len_early = std::atoll(run({"XLEN", "s:paused"}).c_str());
  std::this_thread::sleep_for(milliseconds(400));
  const long long len_late = std::atoll(run({"XLEN", "s:paused"}).c_str());
  EXPECT_EQ(len_early, len_late) << "the stream grew during the pause";
  Reply r = receive(gen.get());
  ASSERT_TRUE(r) << server_->log();
  EXPECT_GE(Clock::now() - paused_at, milliseconds(550)) << "the reply came before the pause ended";
  EXPECT_TRUE(finished(admin_.get(), "s:paused"));
  expect_alive_and_idle();
}

TEST_F(FaultTest, TokenizeStoreFinishingDuringAPauseWaitsForItsEnd) {
  start({"--appendonly", "yes"});
  RedisConn client = server_->connect();
  send_command(client.get(), {"INFER.TOKENIZE", "stories", long_text(2 << 20), "STORE", "tok:paused"});
  std::this_thread::sleep_for(milliseconds(20));  // the text is being tokenised on the background thread
  ASSERT_EQ(run({"CLIENT", "PAUSE", "1500", "WRITE"}), "OK");
  const auto paused_at = Clock::now();
  Reply r = receive(client.get());
  ASSERT_TRUE(r) << server_->log();
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << show(r.get());
  EXPECT_GE(Clock::now() - paused_at, milliseconds(1400));
  EXPECT_EQ(run({"EXISTS", "tok:paused"}), "1");
  expect_alive_and_idle();
}

TEST_F(FaultTest, EmbedStoresFinishingDuringAPauseWaitForItsEnd) {
  start({"--appendonly", "yes"});
  constexpr int kClients = 16;
  std::vector<RedisConn> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(server_->connect());
  const std::string text = long_text(1500);  // off the main thread, then the engine
  for (int i = 0; i < kClients; ++i)
    send_command(clients[i].get(), {"INFER.EMBED", "stories", text, "STORE", "kb:paused", "e" + std::to_string(i)});
  ASSERT_EQ(run({"CLIENT", "PAUSE", "500", "WRITE"}), "OK");
  const long long card_during = std::atoll(run({"INFER.VCARD", "kb:paused"}).c_str());
  int added = 0;
  for (auto& c : clients) {
    Reply r = receive(c.get());
    ASSERT_TRUE(r) << server_->log();
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << show(r.get());
    added += static_cast<int>(r->integer);
  }
  EXPECT_EQ(added, kClients);
  EXPECT_LE(card_during, kClients);
  EXPECT_EQ(run({"INFER.VCARD", "kb:paused"}), std::to_string(kClients));
  expect_alive_and_idle();
}

// CLIENT UNBLOCK answers at once for every blocking command and cancels its work: an EMBED ... STORE
// stores nothing, a LOAD's model is dropped instead of registered. Work that finished first replies
// its result (ClientUnblockAfterTheWorkFinishedGetsTheResult has the narrowest case).
TEST_F(FaultTest, ClientUnblockCancelsEmbedAndLoad) {
  start();
  RedisConn victim = server_->connect();
  const std::string id = std::to_string(command(victim.get(), {"CLIENT", "ID"})->integer);
  send_command(victim.get(), {"INFER.EMBED", "stories", long_text(6000), "STORE", "kb:unblocked", "e"});
  run({"CLIENT", "UNBLOCK", id});
  Reply r = receive(victim.get());
  ASSERT_TRUE(r) << server_->log();
  if (show(r.get()) == "(error) UNBLOCKED client unblocked; embedding cancelled") {
    expect_alive_and_idle();
    EXPECT_EQ(run({"EXISTS", "kb:unblocked"}), "0");
  } else {  // it finished first
    EXPECT_EQ(show(r.get()), "1");
    EXPECT_EQ(run({"EXISTS", "kb:unblocked"}), "1");
  }

  send_command(victim.get(), {"INFER.LOAD", "late", "stories.gguf"});
  run({"CLIENT", "UNBLOCK", id});
  Reply lr = receive(victim.get());
  ASSERT_TRUE(lr) << server_->log();
  if (show(lr.get()) == "(error) UNBLOCKED client unblocked; load cancelled") {
    expect_alive_and_idle();
    EXPECT_EQ(run({"INFER.MODELS"}), "[stories]");
    EXPECT_EQ(run({"INFER.LOAD", "late", "stories.gguf"}), "OK");  // the name is free again
  } else {  // it finished first
    EXPECT_EQ(show(lr.get()), "OK");
    EXPECT_EQ(run({"INFER.MODELS"}), "[late, stories]");
  }
}

// A CLIENT UNBLOCK that arrives after the work ended but before the client's reply went out: the
// client gets its result, as there is nothing left to cancel. (Handed back to Redis from the worker
// thread at once, Redis 7.0 would call none of the module's callbacks for this client, which then
// never got a reply.) DEBUG SLEEP holds the main thread while the load ends; the CLIENT UNBLOCK
// pipelined behind it runs before the event loop goes on.
TEST_F(FaultTest, ClientUnblockAfterTheWorkFinishedGetsTheResult) {
  start();
  RedisConn victim = server_->connect(), other = server_->connect();
  const std::string id = std::to_string(command(victim.get(), {"CLIENT", "ID"})->integer);
  send_command(victim.get(), {"INFER.LOAD", "late", "stories.gguf"});
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (run({"INFO", "clients"}).find("blocked_clients:1") == std::string::npos) {
    if (run({"INFER.MODELS"}) == "[late, stories]") {  // loaded between two polls: the race was not reached
      std::printf("the load ended before a poll saw its client blocked: the race was not reached this time\n");
      EXPECT_EQ(show(receive(victim.get()).get()), "OK");
      expect_alive_and_idle();
      return;
    }
    ASSERT_LT(Clock::now(), deadline) << "the load never blocked its client";
  }
  send_command(other.get(), {"DEBUG", "SLEEP", "2"});  // longer than the load, under sanitizers too
  send_command(other.get(), {"CLIENT", "UNBLOCK", id});
  ASSERT_EQ(show(receive(other.get()).get()), "OK");
  const std::string unblocked = show(receive(other.get()).get());
  Reply lr = receive(victim.get());
  ASSERT_TRUE(lr) << "CLIENT UNBLOCK answered " << unblocked << " and the client got no reply\n" << server_->log();
  // 0: the load ended and replied before the sleep began (a loaded machine), so this run missed the race
  if (unblocked != "1") std::printf("the load replied before DEBUG SLEEP: the race was not reached this time\n");
  EXPECT_EQ(show(lr.get()), "OK");
  EXPECT_EQ(run({"INFER.MODELS"}), "[late, stories]");
  expect_alive_and_idle();
}

// Keyless TOKENIZE, EMBED and GENERATE are reads: they run during a write pause. A short TOKENIZE ...
// STORE (done inline otherwise) waits in the write queue and replies when the pause ends.
TEST_F(FaultTest, KeylessReadsRunDuringAPauseAndStoresWaitForItsEnd) {
  start({"--appendonly", "yes"});
  ASSERT_EQ(run({"CLIENT", "PAUSE", "1500", "WRITE"}), "OK");
  const auto paused_at = Clock::now();
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "hello"}).rfind("[", 0), 0u);
  EXPECT_EQ(command(admin_.get(), {"INFER.EMBED", "stories", "hello"})->type, REDIS_REPLY_STRING);
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4", "TEMP", "0"}).rfind("(error)", 0),
            std::string::npos);
  EXPECT_LT(Clock::now() - paused_at, milliseconds(1000)) << "a keyless read waited for the pause";
  const std::string n_ids = std::to_string(command(admin_.get(), {"INFER.TOKENIZE", "stories", "hello"})->elements);
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "hello", "STORE", "tok:short"}), n_ids);
  EXPECT_GE(Clock::now() - paused_at, milliseconds(1400)) << "a STORE wrote during the pause";
  EXPECT_EQ(run({"EXISTS", "tok:short"}), "1");
  expect_alive_and_idle();
}

// The commands are not flagged write (so that their keyless forms are reads): their writing forms
// refuse on a replica and inside scripts themselves.
TEST_F(FaultTest, WritingFormsRefuseOnReplicasAndInScripts) {
  start();
  EXPECT_EQ(run({"EVAL", "return redis.call('INFER.TOKENIZE', 'stories', 'hi', 'STORE', 'k')", "0"})
                .rfind("(error) ERR STORE cannot run inside a script (a read-only script could write through it)", 0),
            0u);
  const std::string n_ids = std::to_string(command(admin_.get(), {"INFER.TOKENIZE", "stories", "hi"})->elements);
  EXPECT_EQ(run({"EVAL_RO", "return #redis.call('INFER.TOKENIZE', 'stories', 'hi')", "0"}), n_ids);
  ASSERT_EQ(run({"REPLICAOF", "127.0.0.1", kDeadPort}), "OK");
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "hi", "STORE", "k"}),
            "(error) READONLY STORE cannot write on a replica; tokenise without STORE");
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "hi"}).rfind("[", 0), 0u);
  EXPECT_EQ(run({"INFER.EMBED", "stories", "hi", "STORE", "kb", "e"}).rfind("(error) READONLY", 0), 0u);
  EXPECT_EQ(command(admin_.get(), {"INFER.EMBED", "stories", "hi"})->type, REDIS_REPLY_STRING);
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "2", "STREAM", "s"}).rfind("(error) READONLY", 0), 0u);
  EXPECT_EQ(run({"EXISTS", "k", "kb", "s"}), "0");
  ASSERT_EQ(run({"REPLICAOF", "NO", "ONE"}), "OK");
  expect_alive_and_idle();
}

// Seeded random (command, fault) pairs. A replica follows the whole run; at the end its data set must
// equal the master's (DEBUG DIGEST), and every token key acknowledged after the last FLUSHALL exists.
TEST_F(FaultTest, RandomFaults) {
  const char* seed_env = std::getenv("INFER_FAULT_SEED");
  const char* rounds_env = std::getenv("INFER_FAULT_ROUNDS");
  const unsigned seed = seed_env ? static_cast<unsigned>(std::atoll(seed_env)) : 20261125u;
  const int rounds = rounds_env ? std::atoi(rounds_env) : (kSanitizerBuild ? 24 : 48);
  std::printf("RandomFaults: seed %u, %d rounds (INFER_FAULT_SEED / INFER_FAULT_ROUNDS)\n", seed, rounds);
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };

  start({"--appendonly", "yes"});
  RedisServer replica({.module_args = {},
                       .server_args = {"--replicaof", "127.0.0.1", std::to_string(server_->port()),
                                       "--enable-debug-command", "yes"}});
  RedisConn rc = replica.connect();
  run({"CONFIG", "SET", "infer.vsim-thread-threshold", "1"});

  const std::vector<std::string> kCommands = {"generate", "stream", "tokenize", "embed", "rag", "vsim", "load"};
  const std::vector<std::string> kFaults = {"close",   "kill",    "unblock", "pause",  "replicaof",
                                            "reload",  "bgsave",  "flushall", "unload"};
  std::vector<std::string> acked_keys;
  for (int round = 0; round < rounds; ++round) {
    const std::string& what = kCommands[pick(static_cast<int>(kCommands.size()))];
    const std::string& fault = kFaults[pick(static_cast<int>(kFaults.size()))];
    const int delay_ms = pick(40);
    SCOPED_TRACE("round " + std::to_string(round) + ": " + what + " + " + fault + " after " +
                 std::to_string(delay_ms) + " ms (seed " + std::to_string(seed) + ")");
    // Each round starts from a master with the model loaded and a small vector set with documents.
    if (run({"INFER.MODELS"}).find("stories") == std::string::npos) {
      ASSERT_EQ(run({"INFER.LOAD", "stories", "stories.gguf"}), "OK");
    }
    run({"INFER.UNLOAD", "spare"});
    run({"INFER.TOKENIZE", "stories", "The bird sang.", "STORE", "{kb}:doc"});
    run({"INFER.VADD", "{kb}", "VALUES", "3", "1", "0", "0", "d", "SETATTR", "{\"tokens\":\"{kb}:doc\"}"});

    RedisConn client = server_->connect(5000);
    const std::string id = std::to_string(command(client.get(), {"CLIENT", "ID"})->integer);
    const std::string key = "r" + std::to_string(round);
    if (what == "generate")
      send_command(client.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "600", "TEMP", "1"});
    else if (what == "stream")
      send_command(client.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "600", "STREAM", key});
    else if (what == "tokenize")
      send_command(client.get(), {"INFER.TOKENIZE", "stories", long_text(200000 + pick(400000)), "STORE", key});
    else if (what == "embed")
      send_command(client.get(), {"INFER.EMBED", "stories", long_text(300 + pick(3000)), "STORE", "kb:" + key, "e"});
    else if (what == "rag")
      send_command(client.get(), {"INFER.RAG", "stories", "{kb}", "VALUES", "3", "1", "0", "0", "MAXTOKENS", "300", "STREAM", "{kb}:" + key});
    else if (what == "vsim")
      send_command(client.get(), {"INFER.VSIM", "{kb}", "VALUES", "3", "1", "0", "0", "COUNT", "5"});
    else
      send_command(client.get(), {"INFER.LOAD", "spare", "stories.gguf"});
    std::this_thread::sleep_for(milliseconds(delay_ms));

    bool client_open = true;
    if (fault == "close") {
      client.reset();
      client_open = false;
    } else if (fault == "kill") {
      run({"CLIENT", "KILL", "ID", id});
      client_open = false;
    } else if (fault == "unblock") {
      run({"CLIENT", "UNBLOCK", id, pick(2) ? "ERROR" : "TIMEOUT"});
    } else if (fault == "pause") {
      run({"CLIENT", "PAUSE", std::to_string(50 + pick(300)), "WRITE"});
    } else if (fault == "replicaof") {
      run({"REPLICAOF", "127.0.0.1", kDeadPort});
      std::this_thread::sleep_for(milliseconds(pick(100)));
      run({"REPLICAOF", "NO", "ONE"});
    } else if (fault == "reload") {
      run({"DEBUG", "RELOAD"});
    } else if (fault == "bgsave") {
      run({"BGSAVE"});
    } else if (fault == "flushall") {
      run({"FLUSHALL"});
      acked_keys.clear();
    } else {
      run({"INFER.UNLOAD", "stories"});
    }
    if (client_open) {
      Reply r = receive(client.get());
      if (r && what == "tokenize" && r->type == REDIS_REPLY_INTEGER) acked_keys.push_back(key);
    }
    ASSERT_TRUE(server_->alive()) << server_->log();
    ASSERT_EQ(run({"PING"}), "PONG") << server_->log();
  }
  run({"INFER.LOAD", "stories", "stories.gguf"});
  expect_alive_and_idle();
  for (const auto& k : acked_keys) EXPECT_EQ(run({"EXISTS", k}), "1") << k;

  // The replica saw exactly the master's writes. A REPLICAOF NO ONE fault disconnects it; it then
  // reconnects (once a second) and may need a full resync, which a sanitizer build takes long over.
  ASSERT_TRUE(wait_for(
      [&] {
        return show(command(rc.get(), {"INFO", "replication"}).get()).find("master_link_status:up") != std::string::npos &&
               info_field(admin_.get(), "replication", "master_repl_offset") ==
                   info_field(rc.get(), "replication", "slave_repl_offset");
      },
      milliseconds(kSanitizerBuild ? 120000 : 30000)))
      << "master: " << run({"INFO", "replication"}) << "\nreplica: " << show(command(rc.get(), {"INFO", "replication"}).get())
      << "\nreplica log:\n" << replica.log();
  EXPECT_EQ(run({"DEBUG", "DIGEST"}), show(command(rc.get(), {"DEBUG", "DIGEST"}).get()));
  EXPECT_TRUE(replica.alive());
}

}  // namespace
}  // namespace infer::test
