// INFER.VADD ... REDUCE through a real redis-server: full-size vectors in, the reduced dimension reported,
// the projection kept across DEBUG RELOAD (RDB) and AOF rewrite, and the mismatches refused clearly.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "vector_test_util.h"

namespace infer::test {
namespace {

std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

// Adds n random 64-d vectors reduced to 16 (the first with REDUCE, the rest full-size without it).
std::vector<std::vector<float>> fill(redisContext* c, int n) {
  std::mt19937 rng(21);
  std::vector<std::vector<float>> added;
  for (int i = 0; i < n; ++i) {
    added.push_back(random_vec(64, rng));
    std::vector<std::string> argv = {"INFER.VADD", "r"};
    if (i == 0) argv.insert(argv.end(), {"REDUCE", "16"});
    argv.insert(argv.end(), {"FP32", fp32(added.back()), "e" + std::to_string(i)});
    if (i % 4 == 0) argv.insert(argv.end(), {"SETATTR", "{\"i\": " + std::to_string(i) + "}"});
    EXPECT_EQ(run(c, argv), "1") << i;
  }
  return added;
}

std::string top(redisContext* c, const std::vector<float>& q) {
  return run(c, {"INFER.VSIM", "r", "FP32", fp32(q), "COUNT", "3", "WITHSCORES", "WITHATTRIBS"});
}

class VsetReduce : public ::testing::Test {
 protected:
  void SetUp() override { INFER_REQUIRE_DIR(models_dir()); }
};

TEST_F(VsetReduce, FullSizeVectorsAreProjectedAndFindThemselves) {
  RedisServer s({.server_args = {"--enable-debug-command", "yes"}});
  RedisConn c = s.connect();
  auto added = fill(c.get(), 200);
  EXPECT_EQ(run(c.get(), {"INFER.VDIM", "r"}), "16");
  const std::string info = run(c.get(), {"INFER.VINFO", "r"});
  EXPECT_NE(info.find("projection-input-dim, 64"), std::string::npos) << info;
  EXPECT_NE(info.find("vector-dim, 16"), std::string::npos) << info;
  for (int i = 0; i < 200; i += 37) {
    Reply r = command(c.get(), {"INFER.VSIM", "r", "FP32", fp32(added[i]), "COUNT", "1"});
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
    ASSERT_EQ(r->elements, 1u);
    EXPECT_EQ(std::string(r->element[0]->str), "e" + std::to_string(i));
  }
  Reply emb = command(c.get(), {"INFER.VEMB", "r", "e1"});
  EXPECT_EQ(emb->elements, 16u);  // the stored, reduced vector
}

TEST_F(VsetReduce, MismatchesAreClearErrors) {
  RedisServer s;
  RedisConn c = s.connect();
  fill(c.get(), 2);
  std::mt19937 rng(2);
  EXPECT_NE(run(c.get(), {"INFER.VADD", "r", "REDUCE", "8", "FP32", fp32(random_vec(64, rng)), "x"})
                .find("projection dimension mismatch with existing set: it reduces to 16 dimensions, asked 8"),
            std::string::npos);
  EXPECT_NE(run(c.get(), {"INFER.VADD", "r", "FP32", fp32(random_vec(16, rng)), "x"})
                .find("Input dimension mismatch for projection - got 16 but projection expects 64 (it reduces 64-dimensional vectors to 16)"),
            std::string::npos);
  EXPECT_NE(run(c.get(), {"INFER.VSIM", "r", "FP32", fp32(random_vec(32, rng))}).find("dimension mismatch"),
            std::string::npos);
  EXPECT_NE(run(c.get(), {"INFER.VADD", "r", "FP32", fp32(random_vec(64, rng)), "x", "REDUCE", "16"})
                .find("syntax error"),
            std::string::npos);  // REDUCE belongs right before the vector
  EXPECT_NE(run(c.get(), {"INFER.VADD", "n", "REDUCE", "8", "x", "FP32", fp32(random_vec(64, rng))})
                .find("REDUCE must come immediately before the vector"),
            std::string::npos);
  EXPECT_NE(run(c.get(), {"INFER.VADD", "n", "REDUCE", "80", "FP32", fp32(random_vec(64, rng)), "x"})
                .find("must not exceed"),
            std::string::npos);
  EXPECT_NE(run(c.get(), {"INFER.VADD", "n", "REDUCE", "0", "FP32", fp32(random_vec(64, rng)), "x"}).find("REDUCE"),
            std::string::npos);
  EXPECT_EQ(run(c.get(), {"EXISTS", "n"}), "0");
  run(c.get(), {"INFER.VADD", "plain", "FP32", fp32(random_vec(64, rng)), "x"});
  EXPECT_NE(run(c.get(), {"INFER.VADD", "plain", "REDUCE", "16", "FP32", fp32(random_vec(64, rng)), "y"})
                .find("created without REDUCE"),
            std::string::npos);
  EXPECT_EQ(run(c.get(), {"INFER.VCARD", "r"}), "2");
}

TEST_F(VsetReduce, RdbReloadAndAofRewriteKeepTheProjection) {
  RedisServer s({.server_args = {"--enable-debug-command", "yes", "--appendonly", "yes", "--aof-use-rdb-preamble",
                                 "no"}});
  RedisConn c = s.connect();
  auto added = fill(c.get(), 150);
  std::string before;
  for (int i = 0; i < 150; i += 30) before += top(c.get(), added[i]);
  ASSERT_EQ(run(c.get(), {"DEBUG", "RELOAD"}), "OK");
  EXPECT_EQ(run(c.get(), {"INFER.VDIM", "r"}), "16");
  std::string after;
  for (int i = 0; i < 150; i += 30) after += top(c.get(), added[i]);
  EXPECT_EQ(after, before);
  // AOF rewrite re-adds the reduced vectors (REDUCED-FROM); reloading the AOF gives the same set.
  ASSERT_NE(run(c.get(), {"BGREWRITEAOF"}).find("rewriting"), std::string::npos);
  for (int t = 0; t < 500 && run(c.get(), {"INFO", "persistence"}).find("aof_rewrite_in_progress:0") == std::string::npos;
       ++t)
    usleep(10000);
  ASSERT_EQ(run(c.get(), {"DEBUG", "LOADAOF"}), "OK");
  EXPECT_NE(run(c.get(), {"INFER.VINFO", "r"}).find("projection-input-dim, 64"), std::string::npos);
  EXPECT_EQ(run(c.get(), {"INFER.VCARD", "r"}), "150");
  for (int i = 0; i < 150; i += 30) {
    Reply r = command(c.get(), {"INFER.VSIM", "r", "FP32", fp32(added[i]), "COUNT", "1"});
    ASSERT_EQ(r->elements, 1u);
    EXPECT_EQ(std::string(r->element[0]->str), "e" + std::to_string(i));
  }
}

}  // namespace
}  // namespace infer::test
