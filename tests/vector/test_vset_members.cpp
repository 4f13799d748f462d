// INFER.VISMEMBER, INFER.VRANDMEMBER, INFER.VRANGE and INFER.VLINKS (Redis 8's grammar) through a real redis-server:
// membership, random draws with Redis's count semantics (and their cap), the graph's links per level
// with VSIM's scores, RESP3 shapes, errors, and the read permission on the key.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "vector_test_util.h"

namespace infer::test {
namespace {

class VsetMembers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new RedisServer({.module_args = {}});
    RedisConn c = server_->connect();
    std::mt19937 rng(5);
    for (int i = 0; i < 200; ++i)
      EXPECT_EQ(show(command(c.get(), {"INFER.VADD", "m", "FP32", fp32(random_vec(16, rng)), "e" + std::to_string(i)}).get()), "1");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { c_ = server_->connect(); }
  std::string run(const std::vector<std::string>& argv) { return show(command(c_.get(), argv).get()); }
  Reply reply(const std::vector<std::string>& argv) { return command(c_.get(), argv); }

  static inline RedisServer* server_ = nullptr;
  RedisConn c_;
};

TEST_F(VsetMembers, VismemberSaysWhetherAnElementIsThere) {
  EXPECT_EQ(run({"INFER.VISMEMBER", "m", "e7"}), "1");
  EXPECT_EQ(run({"INFER.VISMEMBER", "m", "nope"}), "0");
  EXPECT_EQ(run({"INFER.VISMEMBER", "missing", "e7"}), "0");
  EXPECT_EQ(run({"SET", "str", "x"}), "OK");
  EXPECT_NE(run({"INFER.VISMEMBER", "str", "e7"}).find("WRONGTYPE"), std::string::npos);
  EXPECT_NE(run({"INFER.VISMEMBER", "m"}).find("wrong number of arguments"), std::string::npos);
}

TEST_F(VsetMembers, VrandmemberFollowsRedisCountSemantics) {
  // No count: one element of the set; null for a missing key.
  const std::string one = run({"INFER.VRANDMEMBER", "m"});
  EXPECT_EQ(run({"INFER.VISMEMBER", "m", one}), "1") << one;
  EXPECT_EQ(run({"INFER.VRANDMEMBER", "missing"}), "(nil)");
  EXPECT_EQ(run({"INFER.VRANDMEMBER", "missing", "5"}), "[]");
  EXPECT_EQ(run({"INFER.VRANDMEMBER", "m", "0"}), "[]");
  // Positive: distinct, at most the set's size.
  for (const char* n : {"1", "10", "150", "200", "5000"}) {
    Reply r = reply({"INFER.VRANDMEMBER", "m", n});
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    EXPECT_EQ(r->elements, std::min<size_t>(std::stoul(n), 200));
    std::set<std::string> seen;
    for (size_t i = 0; i < r->elements; ++i) seen.insert(std::string(r->element[i]->str, r->element[i]->len));
    EXPECT_EQ(seen.size(), r->elements) << n;
  }
  // Negative: exactly |count|, repeats allowed (1,000 draws from 200 must repeat).
  Reply many = reply({"INFER.VRANDMEMBER", "m", "-1000"});
  ASSERT_EQ(many->elements, 1000u);
  std::set<std::string> seen;
  for (size_t i = 0; i < many->elements; ++i) seen.insert(std::string(many->element[i]->str, many->element[i]->len));
  EXPECT_LT(seen.size(), 1000u);
  EXPECT_GT(seen.size(), 100u);
  // Extreme counts are capped, never an allocation of their size.
  EXPECT_EQ(reply({"INFER.VRANDMEMBER", "m", "-9223372036854775808"})->elements, 65536u);
  EXPECT_EQ(reply({"INFER.VRANDMEMBER", "m", "9223372036854775807"})->elements, 200u);
  EXPECT_NE(run({"INFER.VRANDMEMBER", "m", "x"}).find("not an integer"), std::string::npos);
  EXPECT_NE(run({"INFER.VRANDMEMBER", "m", "99999999999999999999"}).find("not an integer"), std::string::npos);
}

TEST_F(VsetMembers, VlinksAreTheGraphsNeighboursWithVsimScores) {
  Reply r = reply({"INFER.VLINKS", "m", "e3", "WITHSCORES"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
  ASSERT_GE(r->elements, 1u);
  const redisReply* level0 = r->element[0];
  ASSERT_GT(level0->elements, 0u);
  ASSERT_EQ(level0->elements % 2, 0u);
  for (size_t i = 0; i < level0->elements; i += 2) {
    const std::string name(level0->element[i]->str, level0->element[i]->len);
    const double score = std::stod(std::string(level0->element[i + 1]->str, level0->element[i + 1]->len));
    EXPECT_NE(name, "e3");
    // The score is the one VSIM gives that element for e3's vector.
    Reply sim = reply({"INFER.VSIM", "m", "ELE", "e3", "COUNT", "200", "EF", "400", "WITHSCORES", "TRUTH"});
    for (size_t k = 0; k < sim->elements; k += 2) {
      if (std::string(sim->element[k]->str, sim->element[k]->len) != name) continue;
      EXPECT_NEAR(std::stod(std::string(sim->element[k + 1]->str, sim->element[k + 1]->len)), score, 1e-5) << name;
    }
    if (i >= 6) break;  // a few are enough
  }
  // Without scores: names only, as many as with them.
  Reply names = reply({"INFER.VLINKS", "m", "e3"});
  ASSERT_EQ(names->elements, r->elements);
  EXPECT_EQ(names->element[0]->elements * 2, level0->elements);
  EXPECT_EQ(run({"INFER.VLINKS", "m", "nope"}), "(nil)");
  EXPECT_EQ(run({"INFER.VLINKS", "missing", "e3"}), "(nil)");
  EXPECT_NE(run({"INFER.VLINKS", "m", "e3", "SCORES"}).find("syntax error"), std::string::npos);
}

TEST_F(VsetMembers, VrangeIteratesNamesInByteOrder) {
  const std::vector<std::string> fruit = {"fig", "apple", "cherry", "banana", "apricot", "date", "grape", "Zucchini"};
  for (const std::string& f : fruit)
    ASSERT_EQ(run({"INFER.VADD", "fruit", "VALUES", "2", "1", std::to_string(f.size()), f}), "1");
  EXPECT_EQ(run({"INFER.VRANGE", "fruit", "[apple", "[grape", "5"}), "[apple, apricot, banana, cherry, date]");
  EXPECT_EQ(run({"INFER.VRANGE", "fruit", "(apple", "[cherry"}), "[apricot, banana, cherry]");
  EXPECT_EQ(run({"INFER.VRANGE", "fruit", "[b", "(date", "-1"}), "[banana, cherry]");
  EXPECT_EQ(run({"INFER.VRANGE", "fruit", "-", "+", "-1"}), "[Zucchini, apple, apricot, banana, cherry, date, fig, grape]");
  EXPECT_EQ(run({"INFER.VRANGE", "fruit", "-", "+"}).size(), run({"INFER.VRANGE", "fruit", "-", "+", "10"}).size());
  EXPECT_EQ(run({"INFER.VRANGE", "fruit", "+", "-"}), "[]");
  EXPECT_EQ(run({"INFER.VRANGE", "fruit", "[z", "+"}), "[]");
  EXPECT_EQ(run({"INFER.VRANGE", "missing", "-", "+"}), "[]");
  // A stateless iterator: three at a time, each call from after the last name.
  std::string from = "-", all;
  for (int i = 0; i < 4; ++i) {
    Reply r = reply({"INFER.VRANGE", "fruit", from, "+", "3"});
    for (size_t k = 0; k < r->elements; ++k) all += std::string(r->element[k]->str, r->element[k]->len) + " ";
    if (r->elements == 0) break;
    from = "(" + std::string(r->element[r->elements - 1]->str, r->element[r->elements - 1]->len);
  }
  EXPECT_EQ(all, "Zucchini apple apricot banana cherry date fig grape ");
  // A removed name leaves the order; a re-added one comes back.
  EXPECT_EQ(run({"INFER.VREM", "fruit", "banana"}), "1");
  EXPECT_EQ(run({"INFER.VRANGE", "fruit", "[b", "(d"}), "[cherry]");
  EXPECT_NE(run({"INFER.VRANGE", "fruit", "apple", "+"}).find("invalid range"), std::string::npos);
  EXPECT_NE(run({"INFER.VRANGE", "fruit", "-", "+", "many"}).find("not an integer"), std::string::npos);
}

TEST_F(VsetMembers, Resp3ShapesAndReadPermission) {
  Resp3Client r3(server_->port());
  const Resp3Value links = r3.call({"INFER.VLINKS", "m", "e3", "WITHSCORES"});
  ASSERT_EQ(links.type, '*');
  EXPECT_EQ(links.elems[0].type, '%');  // a map of name -> double per level
  EXPECT_EQ(links.elems[0].elems[1].type, ',');
  EXPECT_EQ(r3.call({"INFER.VISMEMBER", "m", "e3"}).integer, 1);
  EXPECT_EQ(r3.call({"INFER.VRANDMEMBER", "missing"}).type, '_');
  // A user who may not read the key gets NOPERM for all three.
  EXPECT_EQ(run({"ACL", "SETUSER", "blind", "on", ">pw", "+@all", "~other:*"}), "OK");
  EXPECT_EQ(run({"AUTH", "blind", "pw"}), "OK");
  for (const std::vector<std::string>& argv : {std::vector<std::string>{"INFER.VISMEMBER", "m", "e3"},
                                               std::vector<std::string>{"INFER.VRANDMEMBER", "m"},
                                               std::vector<std::string>{"INFER.VLINKS", "m", "e3"}})
    EXPECT_NE(run(argv).find("NOPERM"), std::string::npos) << argv[0];
}

}  // namespace
}  // namespace infer::test
