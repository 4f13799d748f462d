// FILTER limits through a real redis-server: an expression past the node or depth limit is refused with
// an error naming the limit, the server keeps serving, and long and/or chains under the limit evaluate on
// the main thread and on the search threads alike.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

std::string chain(const std::string& first, const std::string& link, size_t links) {
  std::string s = first;
  for (size_t i = 0; i < links; ++i) s += link;
  return s;
}

class VsetFilter : public SharedServerTest<VsetFilter> {
 public:
  static std::vector<std::string> module_args() { return {}; }

 protected:
  void SetUp() override {
    SharedServerTest<VsetFilter>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    run({"FLUSHALL"});
    ASSERT_EQ(run({"INFER.VADD", "vf", "VALUES", "3", "1", "1", "1", "e", "SETATTR", R"({"n":1})"}), "1");
    ASSERT_EQ(run({"INFER.VADD", "vf", "VALUES", "3", "1", "0", "1", "f", "SETATTR", R"({"n":2})"}), "1");
  }
};

TEST_F(VsetFilter, IssueChainOf50000AndsIsRefusedAndTheServerLives) {
  const std::string err = run({"INFER.VSIM", "vf", "ELE", "e", "FILTER", chain(".n == 1", " and .n == 1", 50000)});
  EXPECT_NE(err.find("(error) ERR"), std::string::npos) << err.substr(0, 300);
  EXPECT_NE(err.find("more than 4096 operands and operators"), std::string::npos) << err.substr(0, 300);
  EXPECT_EQ(run({"PING"}), "PONG");
  EXPECT_TRUE(server_->alive());
}

TEST_F(VsetFilter, DeepExpressionsAreRefusedNamingTheLimit) {
  for (const std::string& deep : {chain("0", " + 1", 5000), chain("", "not ", 5000) + "1",
                                  std::string(100000, '(') + "1" + std::string(100000, ')')}) {
    const std::string err = run({"INFER.VSIM", "vf", "ELE", "e", "FILTER", deep});
    EXPECT_TRUE(err.find("200 levels deep") != std::string::npos || err.find("nested too deeply") != std::string::npos)
        << err.substr(0, 300);
  }
  EXPECT_EQ(run({"PING"}), "PONG");
}

TEST_F(VsetFilter, LongChainsUnderTheLimitMatchOnBothPaths) {
  const std::string all = chain(".n == 1", " and .n == 1", 999);
  const std::string any = chain(".n == 3", " or .n == 3", 998) + " or .n == 2";
  EXPECT_EQ(run({"INFER.VSIM", "vf", "ELE", "e", "FILTER", all, "NOTHREAD"}), "[e]");
  EXPECT_EQ(run({"INFER.VSIM", "vf", "ELE", "e", "FILTER", any, "NOTHREAD"}), "[f]");
  ASSERT_EQ(run({"CONFIG", "SET", "infer.vsim-thread-threshold", "0"}), "OK");  // search threads
  EXPECT_EQ(run({"INFER.VSIM", "vf", "ELE", "e", "FILTER", all}), "[e]");
  EXPECT_EQ(run({"INFER.VSIM", "vf", "ELE", "e", "FILTER", any}), "[f]");
  ASSERT_EQ(run({"CONFIG", "SET", "infer.vsim-thread-threshold", "1000"}), "OK");
}

TEST_F(VsetFilter, DeeplyNestedAttributesDoNotMatchAndDoNotCrash) {
  const std::string nested = R"({"n": )" + std::string(100000, '[') + "1" + std::string(100000, ']') + "}";
  ASSERT_EQ(run({"INFER.VSETATTR", "vf", "f", nested}), "1");
  EXPECT_EQ(run({"INFER.VSIM", "vf", "ELE", "e", "FILTER", ".n == 1 or 1 in .n"}), "[e]");
  EXPECT_EQ(run({"PING"}), "PONG");
}

}  // namespace
}  // namespace infer::test
