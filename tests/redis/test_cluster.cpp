// Redis Cluster (issue 20): a real 3 masters + 3 replicas cluster on loopback, every node loading the
// module with stories260K. Keyed INFER commands are redirected exactly like core commands (MOVED, ASK,
// TRYAGAIN, checked against CLUSTER KEYSLOT and the slot's owner), keyless reads run on replicas and
// during write pauses, writes that finish after their slot moved leave no stray key, streams whose slot
// moves end with `finish` (or the reply says why), and a failover during generation leaves a new master
// that serves the model (also one loaded by INFER.LOAD on the old master).
//
// Tests skip (with the reason) when this redis-server cannot run in cluster mode.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_cluster.h"
#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

using Clock = std::chrono::steady_clock;
using Args = std::vector<std::string>;

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool is_error(const std::string& s) { return starts_with(s, "(error)") || s == "(no reply)"; }

std::string run_on(redisContext* c, const Args& argv) { return show(command(c, argv).get()); }

// A cluster shared by the tests of one suite (started once; the tests use their own hash tags, so they
// do not see each other's keys even though slots move).
template <class Suite>
class SharedClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::is_directory(models_dir())) return;  // SetUp skips
    skip_reason_ = new std::string(RedisCluster::unavailable_reason());
    if (!skip_reason_->empty()) return;
    start_error_ = new std::string;
    try {
      cluster_ = new RedisCluster(Suite::options());
    } catch (const std::exception& e) {
      *start_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete skip_reason_;
    skip_reason_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }
  void SetUp() override {
    INFER_REQUIRE_DIR(models_dir());
    if (skip_reason_ && !skip_reason_->empty()) GTEST_SKIP() << *skip_reason_;
    ASSERT_NE(cluster_, nullptr) << "the cluster did not start: " << (start_error_ ? *start_error_ : "");
    // A previous test may have left the cluster in motion (a slot just moved, a failover).
    std::string missing = cluster_->wait_stable(15000);
    ASSERT_EQ(missing, "") << cluster_->logs_tail();
  }
  void TearDown() override {
    if (!cluster_) return;
    for (size_t i = 0; i < cluster_->size(); ++i)
      EXPECT_TRUE(cluster_->server(i).alive()) << "node " << i << " died\n" << cluster_->server(i).log();
  }
  RedisCluster& c() { return *cluster_; }
  std::string on(size_t node, const Args& argv) {
    RedisConn conn = c().connect(node);
    return run_on(conn.get(), argv);
  }
  std::string moved(int slot, size_t owner) {
    return "(error) MOVED " + std::to_string(slot) + " " + c().address(owner);
  }
  std::string ask(int slot, size_t target) { return "(error) ASK " + std::to_string(slot) + " " + c().address(target); }

  static inline RedisCluster* cluster_ = nullptr;
  static inline std::string* skip_reason_ = nullptr;
  static inline std::string* start_error_ = nullptr;
};

class ClusterTest : public SharedClusterTest<ClusterTest> {
 public:
  static RedisClusterOptions options() {
    return {.module_args = {"MODEL", "stories", stories_model_path(), "QUEUE", "64"}};
  }
};

// Texts of 0.3 to 2 KB (tokenised off the main thread, longer embeddings) so that some embeddings
// finish before the slot moves and others are still running when it does.
std::string long_text(int i) {
  std::string s;
  while (s.size() < 300u + 250u * static_cast<unsigned>(i))
    s += "Once upon a time there was a little girl named Lily number " + std::to_string(i) +
         ". She liked to play in the park with her dog. ";
  return s;
}

// Every keyed INFER command (the key in `k`, `kb`, `out`), for the redirection tests.
std::vector<Args> keyed_commands(const std::string& tag) {
  const std::string k = tag + "tok", kb = tag + "kb", out = tag + "out";
  return {
      {"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", k},
      {"INFER.DETOKENIZE", "stories", "KEY", k},
      {"INFER.EMBED", "stories", "cow", "STORE", kb, "e2"},
      {"INFER.GENERATE", "stories", "TOKENS", k, "MAXTOKENS", "4"},
      {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4", "STREAM", out},
      {"INFER.RAG", "stories", kb, "QUERY", "cow", "MAXTOKENS", "4"},
      {"INFER.RAG", "stories", kb, "QUERY", "cow", "MAXTOKENS", "4", "STREAM", out},
      {"INFER.VADD", kb, "VALUES", "3", "1", "0", "0", "v3"},
      {"INFER.VSIM", kb, "ELE", "cow"},
      {"INFER.VREM", kb, "cow"},
      {"INFER.VEMB", kb, "cow"},
      {"INFER.VCARD", kb},
      {"INFER.VDIM", kb},
      {"INFER.VINFO", kb},
      {"INFER.VSETATTR", kb, "cow", R"({"a":1})"},
      {"INFER.VGETATTR", kb, "cow"},
      {"INFER.VISMEMBER", kb, "cow"},
      {"INFER.VRANDMEMBER", kb, "-2"},
      {"INFER.VRANGE", kb, "-", "+", "10"},
      {"INFER.VLINKS", kb, "cow", "WITHSCORES"},
      {"INFER.VADD", kb, "VALUES", "3", "1", "0", "0", "v4", "CAS"},
  };
}

std::string join(const Args& a) {
  std::string s;
  for (const auto& w : a) s += (s.empty() ? "" : " ") + w;
  return s;
}

TEST_F(ClusterTest, EveryKeyedCommandOnANonOwnerGetsMovedLikeGet) {
  const std::string tag = "{moved}";
  const int slot = c().key_slot(tag + "tok");
  ASSERT_EQ(c().key_slot(tag + "kb"), slot);
  const size_t owner = c().node_for_slot(slot);
  const size_t other = c().master_not_owning(slot);
  auto owner_replicas = c().replicas_of(owner);
  ASSERT_FALSE(owner_replicas.empty());
  const size_t replica = owner_replicas.front();

  // The keys exist on the owner, so a command served locally elsewhere would answer something else.
  ASSERT_EQ(on(owner, {"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", tag + "tok"}), "5");
  ASSERT_EQ(on(owner, {"INFER.EMBED", "stories", "cow", "STORE", tag + "kb", "cow"}), "1");

  const std::string expected = moved(slot, owner);
  // The core command on the same nodes: the fixture's idea of the owner is Redis's.
  ASSERT_EQ(on(other, {"GET", tag + "tok"}), expected);
  ASSERT_EQ(on(replica, {"GET", tag + "tok"}), expected);

  for (const auto& cmd : keyed_commands(tag)) {
    EXPECT_EQ(on(other, cmd), expected) << "on a master not owning slot " << slot << ": " << join(cmd);
    // A replica without READONLY redirects to its master like GET does.
    EXPECT_EQ(on(replica, cmd), expected) << "on the owner's replica: " << join(cmd);
  }
  // On the owner the same commands are served (no redirection).
  for (const auto& cmd : keyed_commands(tag)) {
    std::string r = on(owner, cmd);
    EXPECT_FALSE(starts_with(r, "(error) MOVED") || starts_with(r, "(error) ASK")) << join(cmd) << " → " << r;
  }
  // Keys of different slots in one request: CROSSSLOT like MGET.
  const std::string far = "{elsewhere}tok";
  ASSERT_NE(c().key_slot(far), slot);
  std::string mget = on(owner, {"MGET", tag + "tok", far});
  ASSERT_TRUE(starts_with(mget, "(error) CROSSSLOT")) << mget;
  EXPECT_EQ(on(owner, {"INFER.GENERATE", "stories", "TOKENS", tag + "tok", far, "MAXTOKENS", "4"}), mget);
  EXPECT_EQ(on(owner, {"INFER.GENERATE", "stories", "TOKENS", tag + "tok", "MAXTOKENS", "4", "STREAM", far}), mget);
  EXPECT_EQ(on(owner, {"INFER.RAG", "stories", tag + "kb", "QUERY", "cow", "MAXTOKENS", "4", "STREAM", far}), mget);
  EXPECT_EQ(on(owner, {"INFER.EMBED", "stories", "cow", "STORE", far, "x"}), on(owner, {"GET", far}));
}

TEST_F(ClusterTest, KeyedCommandsOnAMigratingSlotGetAskForKeysNotOnTheSource) {
  const std::string tag = "{ask}";
  const int slot = c().key_slot(tag);
  const size_t from = c().node_for_slot(slot);
  const size_t to = c().master_not_owning(slot);
  ASSERT_EQ(on(from, {"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", tag + "here"}), "5");

  RedisCluster::SlotMigration m(c(), slot, from, to);
  m.begin();
  const std::string expected = ask(slot, to);
  ASSERT_EQ(on(from, {"GET", tag + "new"}), expected);
  ASSERT_EQ(on(from, {"SET", tag + "new", "x"}), expected);
  for (const auto& cmd : std::vector<Args>{
           {"INFER.TOKENIZE", "stories", "Once", "STORE", tag + "new"},
           {"INFER.DETOKENIZE", "stories", "KEY", tag + "new"},
           {"INFER.EMBED", "stories", "cow", "STORE", tag + "newkb", "cow"},
           {"INFER.GENERATE", "stories", "TOKENS", tag + "new", "MAXTOKENS", "4"},
           {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4", "STREAM", tag + "newout"},
           {"INFER.VADD", tag + "newkb", "VALUES", "3", "1", "0", "0", "a"},
           {"INFER.VCARD", tag + "newkb"},
       })
    EXPECT_EQ(on(from, cmd), expected) << join(cmd);
  // A key still on the source is served there.
  EXPECT_EQ(on(from, {"INFER.DETOKENIZE", "stories", "KEY", tag + "here"}), "Once upon a time");

  // On the target: MOVED back to the source without ASKING (like SET), served after ASKING.
  EXPECT_EQ(on(to, {"SET", tag + "new", "x"}), moved(slot, from));
  EXPECT_EQ(on(to, {"INFER.TOKENIZE", "stories", "Once", "STORE", tag + "new"}), moved(slot, from));
  {
    RedisConn t = c().connect(to);
    ASSERT_EQ(run_on(t.get(), {"ASKING"}), "OK");
    EXPECT_EQ(run_on(t.get(), {"INFER.TOKENIZE", "stories", "Once", "STORE", tag + "new"}), "2");
  }
  EXPECT_EQ(m.move_keys(), 1u);
  m.finish();
  EXPECT_EQ(on(from, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}), "0");
  EXPECT_EQ(on(to, {"INFER.DETOKENIZE", "stories", "KEY", tag + "here"}), "Once upon a time");
  EXPECT_EQ(on(to, {"INFER.DETOKENIZE", "stories", "KEY", tag + "new"}), "Once");
}

// A client that follows an ASK (ASKING, then the command on the importing node) gets its write done
// there, as SET would, also when the write happens after the command returned (EMBED ... STORE, a
// TOKENIZE ... STORE of a text over 256 bytes): refusing it with MOVED back to the source would send
// the client round (the source answers ASK again) until the migration ends.
TEST_F(ClusterTest, BlockingStoreAfterAskingOnTheImportingNodeIsStoredThere) {
  const std::string tag = "{askb}";
  const int slot = c().key_slot(tag);
  const size_t from = c().node_for_slot(slot);
  const size_t to = c().master_not_owning(slot);
  RedisCluster::SlotMigration m(c(), slot, from, to);
  m.begin();
  ASSERT_EQ(on(from, {"INFER.EMBED", "stories", "cow", "STORE", tag + "kb", "cow"}), ask(slot, to));
  {
    RedisConn t = c().connect(to);
    ASSERT_EQ(run_on(t.get(), {"ASKING"}), "OK");
    ASSERT_EQ(run_on(t.get(), {"SET", tag + "core", "x"}), "OK");
    ASSERT_EQ(run_on(t.get(), {"ASKING"}), "OK");
    EXPECT_EQ(run_on(t.get(), {"INFER.EMBED", "stories", "cow", "STORE", tag + "kb", "cow"}), "1");
    ASSERT_EQ(run_on(t.get(), {"ASKING"}), "OK");
    std::string r = run_on(t.get(), {"INFER.TOKENIZE", "stories", long_text(0), "STORE", tag + "tok"});
    EXPECT_FALSE(is_error(r)) << r;
  }
  m.move_keys();
  m.finish();
  EXPECT_EQ(on(from, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}), "0");
  EXPECT_EQ(on(to, {"GET", tag + "core"}), "x");
  EXPECT_EQ(on(to, {"INFER.VCARD", tag + "kb"}), "1");
  EXPECT_EQ(on(to, {"EXISTS", tag + "tok"}), "1");
}

TEST_F(ClusterTest, MultiKeyGenerateWithKeysSplitByAMigrationGetsTryagainLikeMget) {
  const std::string tag = "{try}";
  const int slot = c().key_slot(tag);
  const size_t from = c().node_for_slot(slot);
  const size_t to = c().master_not_owning(slot);
  ASSERT_EQ(on(from, {"INFER.TOKENIZE", "stories", "Once upon", "STORE", tag + "a"}), "3");
  ASSERT_EQ(on(from, {"INFER.TOKENIZE", "stories", "a time", "STORE", tag + "b"}), "3");

  RedisCluster::SlotMigration m(c(), slot, from, to);
  m.begin();
  ASSERT_EQ(on(from, {"MIGRATE", "127.0.0.1", std::to_string(c().port(to)), tag + "b", "0", "5000"}), "OK");
  const std::string mget = on(from, {"MGET", tag + "a", tag + "b"});
  ASSERT_TRUE(starts_with(mget, "(error) TRYAGAIN")) << mget;
  EXPECT_EQ(on(from, {"INFER.GENERATE", "stories", "TOKENS", tag + "a", tag + "b", "MAXTOKENS", "4"}), mget);
  EXPECT_EQ(on(from, {"INFER.GENERATE", "stories", "TOKENS", tag + "a", "MAXTOKENS", "4", "STREAM", tag + "b"}), mget);
  m.move_keys();
  m.finish();
  std::string r = on(to, {"INFER.GENERATE", "stories", "TOKENS", tag + "a", tag + "b", "MAXTOKENS", "4"});
  EXPECT_FALSE(is_error(r)) << r;
}

TEST_F(ClusterTest, KeylessReadsRunOnAReplicaAndStoreIsRefusedThere) {
  const size_t replica = c().replicas().front();
  RedisConn r = c().connect(replica);
  EXPECT_EQ(run_on(r.get(), {"INFER.TOKENIZE", "stories", "hello"}).front(), '[');
  Reply emb = command(r.get(), {"INFER.EMBED", "stories", "hello"});
  ASSERT_TRUE(emb);
  EXPECT_EQ(emb->type, REDIS_REPLY_STRING) << show(emb.get());
  if (emb->type == REDIS_REPLY_STRING) {
    EXPECT_EQ(emb->len, 64u * 4u);
  }
  std::string gen = run_on(r.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4"});
  EXPECT_FALSE(is_error(gen)) << gen;

  // Writing forms are refused on the replica (READONLY, or MOVED to the slot's master), nothing stored.
  for (const std::string key : {"{r1}k", "{r2}k", "{r3}k"}) {
    for (const auto& cmd : std::vector<Args>{
             {"INFER.TOKENIZE", "stories", "hello", "STORE", key},
             {"INFER.EMBED", "stories", "hello", "STORE", key + "kb", "e"},
             {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4", "STREAM", key + "s"},
         }) {
      std::string reply = run_on(r.get(), cmd);
      EXPECT_TRUE(starts_with(reply, "(error) READONLY") || starts_with(reply, "(error) MOVED")) << join(cmd) << " → " << reply;
    }
    EXPECT_EQ(run_on(r.get(), {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(c().key_slot(key))}), "0");
  }
}

TEST_F(ClusterTest, KeylessTokenizeRunsInAReadOnlyFunctionOnAReplica) {
  const size_t replica = c().replicas().front();
  std::string repl = on(replica, {"INFO", "replication"});
  const size_t its_master = c().index_of_port(std::stoi(info_field(repl, "master_port")));
  const std::string lib =
      "#!lua name=infercluster\n"
      "redis.register_function{function_name='infer_tok', flags={'no-writes'},"
      " callback=function(keys, args) return redis.call('INFER.TOKENIZE', 'stories', args[1]) end}";
  ASSERT_EQ(on(its_master, {"FUNCTION", "LOAD", "REPLACE", lib}), "infercluster");
  ASSERT_EQ(on(its_master, {"WAIT", "1", "5000"}), "1");
  for (const size_t node : {its_master, replica}) {
    const std::string reply = on(node, {"FCALL_RO", "infer_tok", "0", "hello"});
    EXPECT_EQ(reply.front(), '[') << "node " << node << ": " << reply;
  }
}

TEST_F(ClusterTest, KeylessReadsAnswerDuringAClientPauseWrite) {
  const size_t master = c().masters().front();
  RedisConn pauser = c().connect(master);
  RedisConn q = c().connect(master);
  // Warm the connection and the model so the timing measures the pause only.
  ASSERT_FALSE(is_error(run_on(q.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4"})));
  const int pause_ms = kSanitizerBuild ? 4000 : 1000;
  const long long bound_ms = kSanitizerBuild ? 2500 : 500;
  ASSERT_EQ(run_on(pauser.get(), {"CLIENT", "PAUSE", std::to_string(pause_ms), "WRITE"}), "OK");
  auto t0 = Clock::now();
  for (const auto& cmd : std::vector<Args>{
           {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4"},
           {"INFER.TOKENIZE", "stories", "hello"},
           {"INFER.EMBED", "stories", "hello"},
       }) {
    auto t = Clock::now();
    std::string r = run_on(q.get(), cmd);
    EXPECT_FALSE(is_error(r)) << join(cmd) << " → " << r;
    EXPECT_LT(ms_since(t), bound_ms) << join(cmd) << " waited for the write pause";
  }
  EXPECT_LT(ms_since(t0), bound_ms + 100);
  run_on(pauser.get(), {"CLIENT", "UNPAUSE"});
}

// Sends `n` EMBED ... STORE of long texts to `node` (each on its own connection), runs `migrate`
// right after, then checks the issue's invariants: no key of the slot on the old owner, each reply a
// 1/0 whose element is on the new owner, or a redirection/error naming the slot.
// With `tokenize`, the requests are TOKENIZE ... STORE of one new key each instead (the same rules).
void late_embed_round(RedisCluster& c, const std::string& tag, size_t from, size_t to, int n,
                      const std::function<void()>& migrate, int round, bool tokenize = false) {
  const int slot = c.key_slot(tag);
  const std::string kb = tag + "kb";
  auto tok_key = [&](int i) { return tag + "tok" + std::to_string(round) + "_" + std::to_string(i); };
  std::vector<RedisConn> conns;
  for (int i = 0; i < n; ++i) conns.push_back(c.connect(from));
  for (int i = 0; i < n; ++i) {
    if (tokenize)
      send_command(conns[i].get(), {"INFER.TOKENIZE", "stories", long_text(i), "STORE", tok_key(i)});
    else
      send_command(conns[i].get(), {"INFER.EMBED", "stories", long_text(i), "STORE", kb,
                                 "late" + std::to_string(round) + "_" + std::to_string(i)});
  }
  migrate();
  int stored = 0, refused = 0;
  std::string refusals;
  for (int i = 0; i < n; ++i) {
    const std::string element = "late" + std::to_string(round) + "_" + std::to_string(i);
    Reply r = receive(conns[i].get());
    std::string s = show(r.get());
    ASSERT_TRUE(r) << "no reply to EMBED " << element;
    if (r->type == REDIS_REPLY_INTEGER) {
      ++stored;
      if (tokenize) {
        EXPECT_GT(r->integer, 0) << s;
        EXPECT_EQ(show(command(c.connect(to).get(), {"EXISTS", tok_key(i)}).get()), "1")
            << tok_key(i) << " replied " << s << " but is not on the new owner";
        continue;
      }
      EXPECT_TRUE(r->integer == 1 || r->integer == 0) << s;
      // It finished before the move: the element travelled with the set.
      EXPECT_NE(show(command(c.connect(to).get(), {"INFER.VEMB", kb, element}).get()), "(nil)")
          << element << " replied " << s << " but is not in the set on the new owner";
      continue;
    }
    ++refused;
    if (refusals.find(s) == std::string::npos) refusals += " " + s;
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << s;
    const std::string slot_s = std::to_string(slot);
    bool ok = starts_with(s, "(error) MOVED " + slot_s + " ") || starts_with(s, "(error) ASK " + slot_s + " ") ||
              starts_with(s, "(error) TRYAGAIN") ||
              (starts_with(s, "(error) ERR") && (s.find(slot_s) != std::string::npos || s.find("slot") != std::string::npos));
    EXPECT_TRUE(ok) << element << ": " << s;
  }
  // Writes after the reply (the queue) are done by now; give a late one a moment anyway.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(show(command(c.connect(from).get(), {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).get()), "0")
      << "a stray key on the old owner (round " << round << "): "
      << show(command(c.connect(from).get(), {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "10"}).get());
  std::cout << "[ late " << (tokenize ? "TOKENIZE" : "EMBED") << " round " << round << ": " << stored << " stored before the move, " << refused
            << " refused:" << refusals << " ]\n";
}

TEST_F(ClusterTest, LateEmbedStoreAfterItsSlotMovedLeavesNoStrayKey) {
  const std::string tag = "{late}";
  const int slot = c().key_slot(tag);
  const size_t a = c().node_for_slot(slot);
  const size_t b = c().master_not_owning(slot);
  ASSERT_EQ(on(a, {"INFER.EMBED", "stories", "cow", "STORE", tag + "kb", "cow"}), "1");
  const int n = 8;
  // Round 1: the slot moves at once (all steps back to back) right after the requests were sent.
  late_embed_round(c(), tag, a, b, n, [&] { c().migrate_slot(slot, a, b); }, 1);
  ASSERT_EQ(c().node_for_slot(slot), b);
  // Round 2: back to the first owner a little later (the short texts have finished by then), pausing
  // between the steps so that writes land in each phase (migrating with the key, migrating without it).
  late_embed_round(c(), tag, b, a, n,
                   [&] {
                     RedisCluster::SlotMigration m(c(), slot, b, a);
                     std::this_thread::sleep_for(std::chrono::milliseconds(60));
                     m.begin();
                     std::this_thread::sleep_for(std::chrono::milliseconds(30));
                     m.move_keys();
                     std::this_thread::sleep_for(std::chrono::milliseconds(30));
                     m.finish();
                   },
                   2);
  // The set is intact on its owner (it moved twice without BUSYKEY).
  std::string card = on(a, {"INFER.VCARD", tag + "kb"});
  EXPECT_FALSE(is_error(card)) << card;
}

TEST_F(ClusterTest, LateTokenizeStoreAfterItsSlotMovedLeavesNoStrayKey) {
  const std::string tag = "{latetok}";
  const int slot = c().key_slot(tag);
  const size_t a = c().node_for_slot(slot);
  const size_t b = c().master_not_owning(slot);
  // Texts over 256 bytes are tokenised off the main thread: the key is written later, by the queue.
  late_embed_round(c(), tag, a, b, 8, [&] { c().migrate_slot(slot, a, b); }, 1, true);
  late_embed_round(c(), tag, b, a, 8,
                   [&] {
                     RedisCluster::SlotMigration m(c(), slot, b, a);
                     m.begin();
                     std::this_thread::sleep_for(std::chrono::milliseconds(5));
                     m.move_keys();
                     m.finish();
                   },
                   2, true);
}

// The XRANGE of `key` on `node` as (field, value...) lists.
std::vector<std::vector<std::string>> stream_entries(RedisCluster& c, size_t node, const std::string& key) {
  std::vector<std::vector<std::string>> out;
  RedisConn conn = c.connect(node);
  Reply r = command(conn.get(), {"XRANGE", key, "-", "+"});
  if (!r || r->type != REDIS_REPLY_ARRAY) return out;
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    std::vector<std::string> fields;
    if (e->type == REDIS_REPLY_ARRAY && e->elements == 2)
      for (size_t j = 0; j < e->element[1]->elements; ++j)
        fields.emplace_back(e->element[1]->element[j]->str, e->element[1]->element[j]->len);
    out.push_back(fields);
  }
  return out;
}

// Starts `n` STREAM generations into the slot of `tag` on its owner, parks an XREAD BLOCK reader at the
// tail of the first stream, moves the slot (back to back, or `paced`: once every stream exists, 300 ms
// migrating with the keys still on the source, far longer than a batch of 16 tokens takes, so the
// module sees the slot migrating while it still holds each key and can end the stream),
// then checks: the reader is answered, each stream on the new owner ends with `finish` unless the
// generation's reply says why it could not (and the old owner's log names the key), and no stream
// was recreated on the old owner. With `paced`, every stream must end with `finish`.
void stream_round(RedisCluster& c, const std::string& tag, bool paced) {
  const int slot = c.key_slot(tag);
  const size_t a = c.node_for_slot(slot);
  const size_t b = c.master_not_owning(slot);
  const int n = 3;
  std::vector<RedisConn> gens;
  for (int i = 0; i < n; ++i) {
    gens.push_back(c.connect(a));
    send_command(gens[i].get(), {"INFER.GENERATE", "stories", "PROMPT", "Once upon a time", "MAXTOKENS", "1500", "TEMP",
                              "1", "SEED", std::to_string(11 + i), "STREAM", tag + "out" + std::to_string(i)});
  }
  // Wait for the first entries, then park a reader at the tail of stream 0 on the old owner.
  RedisConn probe = c.connect(a);
  auto t0 = Clock::now();
  // Paced: every stream exists before the migration starts (else its first entry may meet the slot
  // migrating without the key, which is rightly an ASK with nothing written).
  for (int i = 0; i < (paced ? n : 1); ++i)
    while (run_on(probe.get(), {"XLEN", tag + "out" + std::to_string(i)}) == "0" && ms_since(t0) < 10000)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  RedisConn reader = c.connect(a, 10000);
  send_command(reader.get(), {"XREAD", "BLOCK", "0", "STREAMS", tag + "out0", "$"});
  int finished_before = 0;
  for (int i = 0; i < n; ++i) {
    auto e = stream_entries(c, a, tag + "out" + std::to_string(i));
    if (!e.empty() && !e.back().empty() && e.back()[0] == "finish") ++finished_before;
  }
  RedisCluster::SlotMigration m(c, slot, a, b);
  m.begin();
  if (paced) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  m.move_keys();
  if (paced) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  m.finish();

  // The parked reader is answered (entries, or a redirection when the slot left), never left waiting.
  Reply rr = receive(reader.get());
  EXPECT_TRUE(rr) << "the XREAD BLOCK reader on the old owner was left waiting";

  for (int i = 0; i < n; ++i) {
    const std::string key = tag + "out" + std::to_string(i);
    Reply r = receive(gens[i].get());
    ASSERT_TRUE(r) << "no reply to the generation streaming to " << key;
    std::string s = show(r.get());
    auto entries = stream_entries(c, b, key);
    bool has_finish = !entries.empty() && !entries.back().empty() && entries.back()[0] == "finish";
    std::cout << "[ " << (paced ? "paced" : "at once") << " " << key << ": reply " << s.substr(0, 60) << ", "
              << entries.size() << " entries on the new owner, last "
              << (entries.empty() || entries.back().size() < 2 ? "-" : entries.back()[0] + " " + entries.back()[1])
              << " ]\n";
    if (paced) {
      EXPECT_TRUE(has_finish) << key << ": the slot migrated for 300 ms with the stream on the old owner";
    }
    if (r->type != REDIS_REPLY_ERROR) {
      EXPECT_TRUE(has_finish) << key << ": the generation succeeded but its stream on the new owner ("
                              << entries.size() << " entries) has no finish entry";
    } else if (!has_finish) {
      // The reply says why, and the old owner's log says it too.
      EXPECT_TRUE(s.find("MOVED") != std::string::npos || s.find("ASK") != std::string::npos ||
                  s.find("TRYAGAIN") != std::string::npos || s.find("moved") != std::string::npos ||
                  s.find("slot") != std::string::npos)
          << key << ": " << s;
      EXPECT_NE(c.server(a).log().find(key), std::string::npos) << "the old owner's log does not mention " << key;
    }
  }
  // No stream was recreated on the old owner by a late XADD.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(show(command(c.connect(a).get(), {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).get()), "0")
      << show(command(c.connect(a).get(), {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "10"}).get());
  std::cout << "[ " << finished_before << " of " << n << " streams had finished before the slot moved ]\n";
}

TEST_F(ClusterTest, StreamWhoseSlotMovesMidStreamEndsWithFinishOrTheReplySaysWhy) {
  stream_round(c(), "{stream}", false);
}

TEST_F(ClusterTest, StreamWhoseSlotMigratesSlowlyEndsWithFinish) { stream_round(c(), "{stream2}", true); }

// Failover: a cluster of its own (it changes roles), with a model directory for INFER.LOAD.
class ClusterFailoverTest : public SharedClusterTest<ClusterFailoverTest> {
 public:
  static RedisClusterOptions options() {
    return {.module_args = {"MODEL", "stories", stories_model_path(), "MODEL-DIR", models_dir()}};
  }

 protected:
  // CLUSTER FAILOVER on `replica`, then waits (bounded) until it is a master and the cluster is stable.
  // Asked up to three times: Redis drops the request's start message when the replica has no bus link
  // to its master yet (a cluster just formed, slow under ASan), and the replica gives up after 5 s with
  // "Manual failover timed out" while its master never heard of it.
  void failover(size_t replica) {
    for (int attempt = 0; attempt < 3 && !c().is_master(replica); ++attempt) {
      ASSERT_EQ(on(replica, {"CLUSTER", "FAILOVER"}), "OK");
      auto t0 = Clock::now();
      while (!c().is_master(replica) && ms_since(t0) < 7000) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(c().is_master(replica)) << "node " << replica << " did not become master\n" << c().logs_tail();
    ASSERT_EQ(c().wait_stable(20000), "") << c().logs_tail();
  }
};

TEST_F(ClusterFailoverTest, FailoverDuringAGenerationLeavesANewMasterServingTheModel) {
  const size_t m = c().masters().front();
  const size_t r = c().replicas_of(m).front();
  const std::string tag = c().tag_on(m);
  ASSERT_EQ(on(m, {"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", tag + "tok"}), "5");
  ASSERT_EQ(on(m, {"WAIT", "1", "5000"}), "1");

  std::vector<RedisConn> gens;
  const std::vector<Args> running = {
      {"INFER.GENERATE", "stories", "PROMPT", "Once upon a time", "MAXTOKENS", "1500", "TEMP", "1", "SEED", "1"},
      {"INFER.GENERATE", "stories", "TOKENS", tag + "tok", "MAXTOKENS", "1500", "TEMP", "1", "SEED", "2"},
      {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "1500", "TEMP", "1", "SEED", "3", "STREAM",
       tag + "out"},
  };
  for (const auto& cmd : running) {
    gens.push_back(c().connect(m));
    send_command(gens.back().get(), cmd);
  }
  failover(r);
  for (size_t i = 0; i < gens.size(); ++i) {
    Reply reply = receive(gens[i].get());
    EXPECT_TRUE(reply) << "no reply to " << join(running[i]);
    std::cout << "[ generation " << i << " during the failover: " << show(reply.get()).substr(0, 70) << " ]\n";
  }
  EXPECT_TRUE(c().server(m).alive()) << c().server(m).log();
  EXPECT_EQ(on(m, {"PING"}), "PONG");
  EXPECT_FALSE(c().is_master(m));

  // The new master serves the model, keyless and with the replicated token key.
  std::string g = on(r, {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4"});
  EXPECT_FALSE(is_error(g)) << g;
  g = on(r, {"INFER.GENERATE", "stories", "TOKENS", tag + "tok", "MAXTOKENS", "4"});
  EXPECT_FALSE(is_error(g)) << g;
  // A stream key of the slot now written by the new master.
  g = on(r, {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4", "STREAM", tag + "after"});
  EXPECT_FALSE(is_error(g)) << g;
  auto entries = stream_entries(c(), r, tag + "after");
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.back()[0], "finish");
}

TEST_F(ClusterFailoverTest, ModelLoadedOnAMasterIsServedByItsReplicaAfterFailover) {
  const size_t m = c().masters().front();
  const size_t r = c().replicas_of(m).front();
  ASSERT_EQ(on(m, {"INFER.LOAD", "extra", "stories260K.gguf"}), "OK");
  ASSERT_EQ(on(m, {"WAIT", "1", "5000"}), "1");
  // The replica gets it (loading may take a moment there).
  auto t0 = Clock::now();
  while (on(r, {"INFER.MODELS"}).find("extra") == std::string::npos && ms_since(t0) < 5000)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(on(r, {"INFER.MODELS"}).find("extra"), std::string::npos) << "replica's models: " << on(r, {"INFER.MODELS"});

  failover(r);
  EXPECT_NE(on(r, {"INFER.MODELS"}).find("extra"), std::string::npos)
      << "new master's models: " << on(r, {"INFER.MODELS"});
  std::string g = on(r, {"INFER.GENERATE", "extra", "PROMPT", "Once", "MAXTOKENS", "4"});
  EXPECT_FALSE(is_error(g)) << g;
  // The old master (now a replica) keeps it too.
  EXPECT_NE(on(m, {"INFER.MODELS"}).find("extra"), std::string::npos);

  // An UNLOAD on the new master follows to its replica.
  ASSERT_EQ(on(r, {"INFER.UNLOAD", "extra"}), "OK");
  ASSERT_EQ(on(r, {"WAIT", "1", "5000"}), "1");
  t0 = Clock::now();
  while (on(m, {"INFER.MODELS"}).find("extra") != std::string::npos && ms_since(t0) < 5000)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(on(m, {"INFER.MODELS"}).find("extra"), std::string::npos) << on(m, {"INFER.MODELS"});
}

}  // namespace
}  // namespace infer::test
