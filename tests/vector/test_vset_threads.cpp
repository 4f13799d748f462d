// INFER.VSIM off the main thread (infer.vsim-thread-threshold): threaded searches reply exactly what the
// synchronous path (NOTHREAD) replies, MULTI and Lua run it synchronously, and deleting or rewriting the
// set while threaded searches run neither crashes nor corrupts a reply.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "vector_test_util.h"

namespace infer::test {
namespace {

std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

void fill(redisContext* c, const std::string& key, int n, size_t dim, std::mt19937& rng) {
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> argv = {"INFER.VADD", key, "FP32", fp32(random_vec(dim, rng)), "e" + std::to_string(i)};
    if (i % 2 == 0) argv.insert(argv.end(), {"SETATTR", "{\"i\": " + std::to_string(i) + "}"});
    ASSERT_EQ(run(c, argv), "1");
  }
}

class VsetThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(models_dir());
    server_ = std::make_unique<RedisServer>();
    c_ = server_->connect();
    // Every search of a non-empty set goes to a search thread unless it cannot block.
    ASSERT_EQ(run(c_.get(), {"CONFIG", "SET", "infer.vsim-thread-threshold", "0"}), "OK");
  }
  std::unique_ptr<RedisServer> server_;
  RedisConn c_;
};

TEST_F(VsetThreads, ThreadedResultsEqualNothreadResults) {
  std::mt19937 rng(31);
  fill(c_.get(), "s", 400, 24, rng);
  const std::vector<std::vector<std::string>> options = {
      {}, {"WITHSCORES"}, {"WITHSCORES", "WITHATTRIBS", "COUNT", "7"}, {"EF", "20", "COUNT", "15"},
      {"FILTER", ".i > 100", "WITHATTRIBS"}, {"TRUTH", "WITHSCORES"}, {"EPSILON", "0.2", "WITHSCORES"}};
  for (int q = 0; q < 20; ++q) {
    const std::string query = fp32(random_vec(24, rng));
    for (const auto& opts : options) {
      std::vector<std::string> argv = {"INFER.VSIM", "s", "FP32", query};
      argv.insert(argv.end(), opts.begin(), opts.end());
      const std::string threaded = run(c_.get(), argv);
      argv.push_back("NOTHREAD");
      EXPECT_EQ(threaded, run(c_.get(), argv));
      EXPECT_EQ(threaded.rfind("[", 0), 0u) << threaded;
    }
  }
  EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "s", "ELE", "e3", "WITHSCORES", "COUNT", "3"}),
            run(c_.get(), {"INFER.VSIM", "s", "ELE", "e3", "WITHSCORES", "COUNT", "3", "NOTHREAD"}));
  // Errors found by the search thread come back as errors.
  EXPECT_NE(run(c_.get(), {"INFER.VSIM", "s", "ELE", "nope"}).find("element not found"), std::string::npos);
  EXPECT_NE(run(c_.get(), {"INFER.VSIM", "s", "VALUES", "2", "1", "0"}).find("dimension mismatch"), std::string::npos);
  // Above the threshold again: synchronous, same answer.
  const std::string query = fp32(random_vec(24, rng));
  const std::string threaded = run(c_.get(), {"INFER.VSIM", "s", "FP32", query, "WITHSCORES"});
  ASSERT_EQ(run(c_.get(), {"CONFIG", "SET", "infer.vsim-thread-threshold", "1000000"}), "OK");
  EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "s", "FP32", query, "WITHSCORES"}), threaded);
}

TEST_F(VsetThreads, VsimInsideMultiAndLuaRunsSynchronously) {
  std::mt19937 rng(32);
  fill(c_.get(), "s", 200, 8, rng);
  const std::string expected = run(c_.get(), {"INFER.VSIM", "s", "ELE", "e5", "WITHSCORES", "NOTHREAD"});
  ASSERT_EQ(run(c_.get(), {"MULTI"}), "OK");
  ASSERT_EQ(run(c_.get(), {"INFER.VSIM", "s", "ELE", "e5", "WITHSCORES"}), "QUEUED");
  ASSERT_EQ(run(c_.get(), {"INFER.VCARD", "s"}), "QUEUED");
  EXPECT_EQ(run(c_.get(), {"EXEC"}), "[" + expected + ", 200]");
  EXPECT_EQ(run(c_.get(), {"EVAL", "return redis.call('INFER.VSIM', KEYS[1], 'ELE', 'e5', 'WITHSCORES')", "1", "s"}),
            run(c_.get(), {"EVAL", "return redis.call('INFER.VSIM', KEYS[1], 'ELE', 'e5', 'WITHSCORES', 'NOTHREAD')",
                           "1", "s"}));
}

TEST_F(VsetThreads, DeletingTheSetDuringThreadedSearchesIsSafe) {
  std::mt19937 rng(33);
  fill(c_.get(), "s", 1500, 32, rng);
  std::atomic<bool> bad{false};
  std::vector<std::thread> searchers;
  for (int t = 0; t < 4; ++t) {
    searchers.emplace_back([&, t] {
      RedisConn c = server_->connect();
      std::mt19937 local(100 + t);
      for (int i = 0; i < 60; ++i) {
        // TRUTH scans every element: long enough to overlap the writes below.
        Reply r = command(c.get(), {"INFER.VSIM", "s", "FP32", fp32(random_vec(32, local)), "COUNT", "5",
                                    i % 2 ? "TRUTH" : "WITHSCORES"});
        if (!r || r->type != REDIS_REPLY_ARRAY) bad = true;
      }
    });
  }
  for (int round = 0; round < 20; ++round) {
    const std::string cmd = round % 4 == 0 ? "DEL" : round % 4 == 1 ? "UNLINK" : round % 4 == 2 ? "FLUSHALL" : "DEL";
    run(c_.get(), {cmd, "s"});
    for (int i = 0; i < 50; ++i)
      run(c_.get(), {"INFER.VADD", "s", "FP32", fp32(random_vec(32, rng)), "r" + std::to_string(i)});
    run(c_.get(), {"INFER.VREM", "s", "r3"});
    run(c_.get(), {"INFER.VSETATTR", "s", "r4", "{\"x\": 1}"});
    fill(c_.get(), "s2", 1, 32, rng);  // writes to other keys meanwhile
    run(c_.get(), {"DEL", "s2"});
  }
  for (auto& t : searchers) t.join();
  EXPECT_FALSE(bad);
  EXPECT_TRUE(server_->alive());
  EXPECT_EQ(run(c_.get(), {"INFER.VCARD", "s"}), "49");
}

}  // namespace
}  // namespace infer::test
