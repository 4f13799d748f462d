// Vector sets survive what Redis does with data: RDB save and restart, AOF rewrite without the RDB
// preamble (the module emits INFER.VADD commands) and reload, replication to a replica (full sync
// then the command stream), COPY, MEMORY USAGE.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "vector_test_util.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;

std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

// A temporary directory that outlives single servers (RedisServer deletes its own).
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/infer-vset-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string info_field(redisContext* c, const std::string& section, const std::string& field) {
  std::string info = run(c, {"INFO", section});
  auto at = info.find(field + ":");
  if (at == std::string::npos) return "";
  auto end = info.find('\r', at);
  return info.substr(at + field.size() + 1, end - at - field.size() - 1);
}

template <class F>
bool wait_until(F ok, int timeout_ms = 20000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Fills three sets (Q8 with attributes and removals, NOQUANT, BIN) with random 16-d vectors.
void fill(redisContext* c, std::mt19937& rng, int n, const std::string& prefix = "") {
  std::normal_distribution<float> nd;
  for (int i = 0; i < n; ++i) {
    std::vector<float> v(16);
    for (auto& x : v) x = nd(rng);
    const std::string name = prefix + "e" + std::to_string(i);
    std::vector<std::string> q8 = {"INFER.VADD", "q8", "FP32", fp32(v), name};
    if (i % 3 == 0) q8.insert(q8.end(), {"SETATTR", "{\"i\": " + std::to_string(i) + "}"});
    ASSERT_NE(run(c, q8).find("(error)"), 0u);
    run(c, {"INFER.VADD", "f32", "FP32", fp32(v), name, "NOQUANT", "M", "8"});
    run(c, {"INFER.VADD", "bin", "FP32", fp32(v), name, "BIN"});
  }
  for (int i = 0; i < n; i += 5) run(c, {"INFER.VREM", "q8", prefix + "e" + std::to_string(i)});
}

// Everything observable about the sets, as one string: graph searches (approximate: same graph, same
// answer), exact searches, cardinality, info, a few vectors and attributes.
std::string snapshot(redisContext* c, bool graph_searches = true) {
  std::ostringstream s;
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd;
  for (const char* key : {"q8", "f32", "bin"}) {
    s << key << " card " << run(c, {"INFER.VCARD", key}) << " dim " << run(c, {"INFER.VDIM", key}) << "\n";
    std::string info = run(c, {"INFER.VINFO", key});
    s << info.substr(0, info.find("max-level")) << "\n";
    for (int q = 0; q < 5; ++q) {
      std::vector<float> v(16);
      for (auto& x : v) x = nd(rng);
      if (graph_searches) s << run(c, {"INFER.VSIM", key, "FP32", fp32(v), "COUNT", "5", "WITHSCORES"}) << "\n";
      s << run(c, {"INFER.VSIM", key, "FP32", fp32(v), "COUNT", "5", "TRUTH"}) << "\n";
      s << run(c, {"INFER.VSIM", key, "FP32", fp32(v), "COUNT", "3", "FILTER", ".i % 2 == 0", "TRUTH"}) << "\n";
    }
    for (const char* e : {"e1", "e3", "e5", "e6"}) {
      // AOF reload re-adds the de-normalised vector: the same up to float rounding of the norm.
      if (graph_searches) s << run(c, {"INFER.VEMB", key, e});
      s << " " << run(c, {"INFER.VGETATTR", key, e}) << "\n";
    }
  }
  return s.str();
}

class VsetPersistence : public ::testing::Test {
 protected:
  void SetUp() override { INFER_REQUIRE_DIR(models_dir()); }
};

TEST_F(VsetPersistence, RdbSaveAndRestartGiveSameResults) {
  TempDir dir;
  std::string before;
  {
    RedisServer a({.server_args = {"--dir", dir.path.string(), "--enable-debug-command", "yes"}});
    RedisConn c = a.connect();
    std::mt19937 rng(1);
    fill(c.get(), rng, 300);
    before = snapshot(c.get());
    ASSERT_EQ(run(c.get(), {"SAVE"}), "OK");
  }
  ASSERT_TRUE(fs::exists(dir.path / "dump.rdb"));
  RedisServer b({.server_args = {"--dir", dir.path.string(), "--enable-debug-command", "yes"}});
  RedisConn c = b.connect();
  EXPECT_EQ(snapshot(c.get()), before);
  // DEBUG RELOAD (save + load in place) keeps it too.
  EXPECT_EQ(run(c.get(), {"DEBUG", "RELOAD"}), "OK");
  EXPECT_EQ(snapshot(c.get()), before);
}

TEST_F(VsetPersistence, AofRewriteWithoutRdbPreambleReloads) {
  TempDir dir;
  std::string before;
  double e7_first = 0;
  const std::vector<std::string> aof = {"--dir", dir.path.string(), "--appendonly", "yes",
                                        "--aof-use-rdb-preamble", "no"};
  {
    RedisServer a({.server_args = aof});
    RedisConn c = a.connect();
    std::mt19937 rng(2);
    fill(c.get(), rng, 200);
    before = snapshot(c.get(), /*graph_searches=*/false);  // AOF load rebuilds the graph
    e7_first = std::stod(command(c.get(), {"INFER.VEMB", "f32", "e7"})->element[0]->str);
    ASSERT_EQ(run(c.get(), {"BGREWRITEAOF"}), "Background append only file rewriting started");
    ASSERT_TRUE(wait_until([&] {
      return info_field(c.get(), "persistence", "aof_rewrite_in_progress") == "0" &&
             info_field(c.get(), "persistence", "aof_rewrite_scheduled") == "0";
    }));
    EXPECT_EQ(info_field(c.get(), "persistence", "aof_last_bgrewrite_status"), "ok");
    ASSERT_TRUE(a.alive());
  }
  // The rewritten base file holds INFER.VADD commands, not an RDB preamble.
  std::string base;
  for (const auto& f : fs::directory_iterator(dir.path / "appendonlydir"))
    if (f.path().string().find(".base.aof") != std::string::npos) {
      std::ifstream in(f.path(), std::ios::binary);
      base.assign(std::istreambuf_iterator<char>(in), {});
    }
  ASSERT_FALSE(base.empty());
  EXPECT_EQ(base.rfind("REDIS", 0), std::string::npos);
  EXPECT_NE(base.find("INFER.VADD"), std::string::npos);
  RedisServer b({.server_args = aof});
  RedisConn c = b.connect();
  EXPECT_EQ(snapshot(c.get(), false), before);
  Reply e = command(c.get(), {"INFER.VEMB", "f32", "e7"});
  ASSERT_EQ(e->type, REDIS_REPLY_ARRAY);
  EXPECT_NEAR(std::stod(e->element[0]->str), e7_first, 1e-5);
}

TEST_F(VsetPersistence, ReplicaReceivesIdenticalSets) {
  RedisServer master({.module_args = {"MODEL", "stories", stories_model_path()}});
  RedisConn m = master.connect();
  std::mt19937 rng(3);
  fill(m.get(), rng, 150);
  RedisServer replica({.server_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}});
  RedisConn r = replica.connect();
  ASSERT_TRUE(wait_until([&] { return info_field(r.get(), "replication", "master_link_status") == "up"; }));
  // After the full sync, writes flow as commands: adds, updates, removals, attributes, EMBED STORE.
  fill(m.get(), rng, 40, "late");
  run(m.get(), {"INFER.VADD", "q8", "VALUES", "16", "1", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0",
                "0", "0", "0", "e1"});
  run(m.get(), {"INFER.VSETATTR", "q8", "e3", "{\"i\": 4}"});
  run(m.get(), {"INFER.VREM", "f32", "e6"});
  ASSERT_EQ(run(m.get(), {"INFER.EMBED", "stories", "Once upon a time", "STORE", "kb", "doc", "SETATTR", "{}"}), "1");
  ASSERT_EQ(run(m.get(), {"WAIT", "1", "10000"}), "1");
  EXPECT_EQ(snapshot(r.get()), snapshot(m.get()));
  EXPECT_EQ(run(r.get(), {"INFER.VEMB", "kb", "doc"}), run(m.get(), {"INFER.VEMB", "kb", "doc"}));
  EXPECT_EQ(run(r.get(), {"INFER.VGETATTR", "kb", "doc"}), "{}");
  // Replicas refuse writes.
  EXPECT_NE(run(r.get(), {"INFER.VADD", "q8", "VALUES", "1", "1", "x"}).find("READONLY"), std::string::npos);
}

TEST_F(VsetPersistence, CopyMemoryUsageAndDelete) {
  RedisServer a;
  RedisConn c = a.connect();
  std::mt19937 rng(4);
  fill(c.get(), rng, 100);
  ASSERT_EQ(run(c.get(), {"COPY", "q8", "q8copy"}), "1");
  EXPECT_EQ(run(c.get(), {"INFER.VSIM", "q8copy", "ELE", "e1", "WITHSCORES"}),
            run(c.get(), {"INFER.VSIM", "q8", "ELE", "e1", "WITHSCORES"}));
  run(c.get(), {"INFER.VREM", "q8copy", "e1"});
  EXPECT_EQ(run(c.get(), {"INFER.VCARD", "q8copy"}), "79");
  EXPECT_EQ(run(c.get(), {"INFER.VCARD", "q8"}), "80");  // independent
  const long long mem = std::stoll(run(c.get(), {"MEMORY", "USAGE", "q8"}));
  EXPECT_GT(mem, 80 * (16 + 4));
  EXPECT_EQ(run(c.get(), {"DEL", "q8", "f32"}), "2");
  EXPECT_EQ(run(c.get(), {"UNLINK", "bin"}), "1");
  EXPECT_EQ(run(c.get(), {"DBSIZE"}), "1");
}

}  // namespace
}  // namespace infer::test
