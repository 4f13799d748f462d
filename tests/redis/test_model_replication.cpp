// Models follow the master: INFER.LOAD and INFER.UNLOAD on a master reach its replicas (not its AOF),
// so a replica promoted by a failover serves the same models.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;

bool eventually(const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

// A master and its replica, connected, both with the module.
struct Pair {
  explicit Pair(std::vector<std::string> replica_module_args, std::vector<std::string> master_server_args = {})
      : master({.module_args = {"MODEL-DIR", stories_model_dir()}, .server_args = std::move(master_server_args)}),
        replica({.module_args = std::move(replica_module_args),
                 .server_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}}),
        m(master.connect()),
        r(replica.connect()) {
    EXPECT_TRUE(eventually([&] { return run(r.get(), {"INFO", "replication"}).find("master_link_status:up") != std::string::npos; }));
  }
  RedisServer master, replica;
  RedisConn m, r;
};

std::string read_dir_files(const std::string& dir) {
  std::string all;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    all += ss.str();
  }
  return all;
}

TEST(ModelReplication, LoadAndUnloadReachReplicasNotTheAof) {
  INFER_REQUIRE_DIR(models_dir());
  Pair p({"MODEL-DIR", stories_model_dir()}, {"--appendonly", "yes"});
  redisContext* m = p.m.get();
  redisContext* r = p.r.get();
  RedisServer& master = p.master;
  RedisServer& replica = p.replica;

  ASSERT_EQ(run(m, {"INFER.LOAD", "tiny", "stories.gguf", "CONTEXT", "256"}), "OK");
  ASSERT_TRUE(eventually([&] { return run(r, {"INFER.MODELS"}) == "[tiny]"; })) << replica.log();
  // The replica loaded it with the master's options, and serves reads with it.
  const std::string info = run(r, {"INFER.INFO", "tiny"});
  EXPECT_NE(info.find("context, 256"), std::string::npos) << info;
  const std::vector<std::string> gen = {"INFER.GENERATE", "tiny", "PROMPT", "Once", "MAXTOKENS", "8", "TEMP", "0"};
  EXPECT_EQ(run(r, gen), run(m, gen));

  ASSERT_EQ(run(m, {"INFER.UNLOAD", "tiny"}), "OK");
  ASSERT_TRUE(eventually([&] { return run(r, {"INFER.MODELS"}) == "[]"; })) << replica.log();
  // Models are the node's configuration, not data: nothing of them is in the AOF.
  EXPECT_EQ(read_dir_files(master.dir()).find("INFER.LOAD"), std::string::npos);

  // Loaded again, then the replica is promoted (what a failover does): it serves the model.
  ASSERT_EQ(run(m, {"INFER.LOAD", "tiny", "stories.gguf"}), "OK");
  ASSERT_TRUE(eventually([&] { return run(r, {"INFER.MODELS"}) == "[tiny]"; })) << replica.log();
  ASSERT_EQ(run(r, {"REPLICAOF", "NO", "ONE"}), "OK");
  EXPECT_EQ(run(r, gen), run(m, gen));
}

// A replica that already has a model of that name (its own MODEL line) keeps it; one whose MODEL-DIR
// lacks the file logs why and stays up.
TEST(ModelReplication, ReplicaKeepsItsOwnModelAndLogsWhatItCannotLoad) {
  INFER_REQUIRE_DIR(models_dir());
  Pair p({"MODEL", "tiny", stories_model_path()});
  redisContext* m = p.m.get();
  redisContext* r = p.r.get();
  RedisServer& replica = p.replica;
  ASSERT_EQ(run(m, {"INFER.LOAD", "tiny", "stories.gguf", "CONTEXT", "256"}), "OK");
  ASSERT_EQ(run(m, {"INFER.LOAD", "other", "stories.gguf"}), "OK");
  ASSERT_TRUE(eventually([&] { return replica.log().find("cannot load model 'other' as the master did") != std::string::npos; }))
      << replica.log();
  EXPECT_NE(replica.log().find("this replica keeps its own"), std::string::npos);
  EXPECT_EQ(run(r, {"INFER.MODELS"}), "[tiny]");
  EXPECT_EQ(run(r, {"PING"}), "PONG");
}

}  // namespace
}  // namespace infer::test
