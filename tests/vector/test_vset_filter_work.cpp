// FILTER work through a real redis-server (issue 49, items 2 and 8): the issue's expensive FILTER (ten
// `.s in "<20,000 a>"` terms over 999 elements with a 1,001-byte attribute, 9.3 s on the main thread
// before) no longer holds the main thread: a second client's PING and INFO infer's
// max_main_thread_stall_us stay far below the old seconds, and the reply is still right. Where the
// search cannot leave the main thread (MULTI, NOTHREAD) it stops at the work limit with a clear error.
// String literals take JSON escapes, and removal in insertion order at M 4 leaves every element findable.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "vector_test_util.h"

namespace infer::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

long long max_stall_us(redisContext* c) {
  const std::string info = run(c, {"INFO", "infer"});
  const std::string field = "infer_max_main_thread_stall_us:";
  const size_t at = info.find(field);
  return at == std::string::npos ? -1 : std::stoll(info.substr(at + field.size()));
}

// Elements of the issue's set, as strings of the reply.
std::set<std::string> reply_items(const redisReply* r) {
  std::set<std::string> out;
  if (r && r->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i < r->elements; ++i) out.insert(std::string(r->element[i]->str, r->element[i]->len));
  return out;
}

class VsetFilterWork : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(models_dir());
    server_ = std::make_unique<RedisServer>();
    c_ = server_->connect();
  }

  // The issue's set: 999 elements (under the default infer.vsim-thread-threshold of 1000), attribute `s`
  // of 1,001 bytes: 'a' × 1001 for even elements (they match), 'a' × 1000 + 'b' for odd ones.
  void fill_issue_set() {
    std::mt19937 rng(49);
    const int n = 999;
    for (int i = 0; i < n; ++i) {
      const std::string s = i % 2 == 0 ? std::string(1001, 'a') : std::string(1000, 'a') + "b";
      send_command(c_.get(), {"INFER.VADD", "big", "FP32", fp32(random_vec(2, rng)), "e" + std::to_string(i),
                              "SETATTR", R"({"s": ")" + s + R"("})"});
    }
    for (int i = 0; i < n; ++i) ASSERT_EQ(show(receive(c_.get()).get()), "1");
  }

  static std::string issue_filter() {
    const std::string term = ".s in \"" + std::string(20000, 'a') + "\"";
    std::string f = term;
    for (int i = 1; i < 10; ++i) f += " or " + term;
    return f;
  }

  std::unique_ptr<RedisServer> server_;
  RedisConn c_;
};

TEST_F(VsetFilterWork, IssueFilterDoesNotHoldTheMainThreadAndIsRight) {
  fill_issue_set();
  if (HasFatalFailure()) return;
  const long long stall_before = max_stall_us(c_.get());
  const std::string filter = issue_filter();
  std::atomic<bool> done{false};
  std::atomic<long long> worst_ping_us{0};
  std::atomic<int> pings{0};
  std::thread pinger([&] {
    RedisConn p = server_->connect();
    while (!done) {
      const auto t0 = Clock::now();
      if (run(p.get(), {"PING"}) != "PONG") break;
      const long long us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
      worst_ping_us = std::max<long long>(worst_ping_us, us);
      ++pings;
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // leave the loaded machine some CPU
    }
  });
  const auto t0 = Clock::now();
  std::set<std::string> all;
  for (int q = 0; q < 2; ++q) {
    auto r = command(c_.get(), {"INFER.VSIM", "big", "ELE", "e" + std::to_string(q * 2), "COUNT", "999", "TRUTH",
                                "FILTER", filter});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY) << show(r.get()).substr(0, 300);
    all = reply_items(r.get());
    // Exactly the even elements: the ones whose 1,001 a's lie in the literal.
    ASSERT_EQ(all.size(), 500u);
    for (const auto& e : all) ASSERT_EQ(std::stoi(e.substr(1)) % 2, 0) << e;
    // The graph walk with the default COUNT gives 10 of them.
    const auto walk = reply_items(command(c_.get(), {"INFER.VSIM", "big", "ELE", "e1", "FILTER", filter}).get());
    EXPECT_EQ(walk.size(), 10u);
    for (const auto& e : walk) ASSERT_EQ(std::stoi(e.substr(1)) % 2, 0) << e;
  }
  const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  done = true;
  pinger.join();
  const long long stall = max_stall_us(c_.get());
  std::printf("[ measured ] 4 FILTER searches in %.0f ms; %d PINGs, worst %.1f ms; max_main_thread_stall_us %lld "
              "(before the searches %lld)\n",
              total_ms, pings.load(), worst_ping_us / 1000.0, stall, stall_before);
  EXPECT_GT(pings.load(), 0);
  EXPECT_LT(worst_ping_us.load(), 100'000);  // was 9.3 s; aim 10 ms, generous for a loaded 2-core machine
  EXPECT_GE(stall, 0);
  EXPECT_LT(stall, 100'000);
}

TEST_F(VsetFilterWork, OnTheMainThreadTheFilterStopsAtTheWorkLimit) {
  fill_issue_set();
  if (HasFatalFailure()) return;
  const std::string filter = issue_filter();
  // NOTHREAD: the caller asks for the main thread; the search stops at ~10 ms of work.
  const auto t0 = Clock::now();
  const std::string err = run(c_.get(), {"INFER.VSIM", "big", "ELE", "e0", "TRUTH", "FILTER", filter, "NOTHREAD"});
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_EQ(err.rfind("(error) ERR FILTER work limit exceeded", 0), 0u) << err.substr(0, 300);
  EXPECT_NE(err.find("lower COUNT, FILTER-EF"), std::string::npos) << err;
  // MULTI cannot block: the same error inside EXEC, and the transaction's other commands run.
  ASSERT_EQ(run(c_.get(), {"MULTI"}), "OK");
  ASSERT_EQ(run(c_.get(), {"INFER.VSIM", "big", "ELE", "e0", "TRUTH", "FILTER", filter}), "QUEUED");
  ASSERT_EQ(run(c_.get(), {"INFER.VCARD", "big"}), "QUEUED");
  const std::string exec = run(c_.get(), {"EXEC"});
  EXPECT_NE(exec.find("FILTER work limit exceeded"), std::string::npos) << exec.substr(0, 300);
  EXPECT_NE(exec.find("999]"), std::string::npos) << exec.substr(0, 300);
  const long long stall = max_stall_us(c_.get());
  std::printf("[ measured ] NOTHREAD refusal took %.1f ms at the client; max_main_thread_stall_us %lld\n", ms, stall);
  EXPECT_LT(stall, 100'000);
  // Cheap filters still run on the main thread, under the limit.
  const std::string few = run(c_.get(), {"INFER.VSIM", "big", "ELE", "e0", "COUNT", "3", "FILTER",
                                         "\"b\" in .s", "NOTHREAD"});
  EXPECT_EQ(few.rfind("[e", 0), 0u) << few.substr(0, 200);
  EXPECT_EQ(run(c_.get(), {"PING"}), "PONG");
}

// The estimate uses the mean attribute size: one huge attribute among small ones is not foreseen, so the
// main thread stops at its limit and the search is redone on a search thread, with the right answer.
TEST_F(VsetFilterWork, UnforeseenHeavyElementMovesToASearchThread) {
  std::mt19937 rng(50);
  for (int i = 0; i < 400; ++i)
    send_command(c_.get(), {"INFER.VADD", "skew", "FP32", fp32(random_vec(8, rng)), "e" + std::to_string(i),
                            "SETATTR", R"({"s": "x"})"});
  for (int i = 0; i < 400; ++i) ASSERT_EQ(show(receive(c_.get()).get()), "1");
  // Above the default infer.max-attribute-bytes, which an operator may raise.
  ASSERT_EQ(run(c_.get(), {"CONFIG", "SET", "infer.max-attribute-bytes", "4mb"}), "OK");
  const std::string huge = R"({"s": ")" + std::string(3'000'000, 'y') + R"(z"})";
  ASSERT_EQ(run(c_.get(), {"INFER.VSETATTR", "skew", "e0", huge}), "1");
  ASSERT_EQ(run(c_.get(), {"CONFIG", "SET", "infer.max-attribute-bytes", "512kb"}), "OK");
  // 30 elements inspected at the mean attribute size (7.5 KB) are expected to cost 5.4M units, under
  // half the main thread's limit; e0 alone costs 72M.
  const std::string r = run(c_.get(), {"INFER.VSIM", "skew", "ELE", "e0", "COUNT", "1", "FILTER-EF", "30", "FILTER",
                                       "\"yz\" in .s"});
  EXPECT_EQ(r, "[e0]");
  const long long stall = max_stall_us(c_.get());
  std::printf("[ measured ] skewed set: max_main_thread_stall_us %lld\n", stall);
  EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "skew", "ELE", "e0", "COUNT", "1", "FILTER-EF", "30", "FILTER", "\"yz\" in .s",
                           "NOTHREAD"}).rfind("(error) ERR FILTER work limit exceeded", 0),
            0u);
}

TEST_F(VsetFilterWork, StringLiteralEscapes) {
  ASSERT_EQ(run(c_.get(), {"INFER.VADD", "esc", "VALUES", "2", "1", "0", "nl", "SETATTR", R"({"s": "a\nb"})"}), "1");
  ASSERT_EQ(run(c_.get(), {"INFER.VADD", "esc", "VALUES", "2", "1", "1", "n", "SETATTR", R"({"s": "anb"})"}), "1");
  ASSERT_EQ(run(c_.get(), {"INFER.VADD", "esc", "VALUES", "2", "0", "1", "u", "SETATTR", R"({"s": "é\"😀"})"}), "1");
  EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "esc", "ELE", "nl", "FILTER", R"(.s == "a\nb")"}), "[nl]");
  EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "esc", "ELE", "nl", "FILTER", R"(.s == 'a\nb')"}), "[nl]");
  EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "esc", "ELE", "nl", "FILTER", R"(.s == "anb")"}), "[n]");
  EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "esc", "ELE", "nl", "FILTER", R"(.s == "\u00e9\"\ud83d\ude00")"}), "[u]");
  EXPECT_EQ(run(c_.get(), {"INFER.VSIM", "esc", "ELE", "nl", "FILTER", R"(.s == "a\qb")"}),
            R"((error) ERR invalid FILTER expression at offset 8: invalid escape '\q' in string (valid: \" \' \\ \/ \b \f \n \r \t \uXXXX))");
  EXPECT_NE(run(c_.get(), {"INFER.VSIM", "esc", "ELE", "nl", "FILTER", R"(.s == "\ud83d")"}).find("low surrogate"),
            std::string::npos);
}

// The issue's M 4 case: removing elements in insertion order used to leave one that VSIM ELE with a wide
// beam no longer found. After every VREM each remaining element must find itself, and TRUTH and the
// graph walk must see the same number of elements.
TEST_F(VsetFilterWork, RemovalInInsertionOrderKeepsEveryElementFindable) {
  std::mt19937 rng(9);  // a set that lost item:76 after VREM item:62 before the repair (test_hnsw_removal.cpp)
  const int n = 80;
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(run(c_.get(), {"INFER.VADD", "m4", "FP32", fp32(random_vec(8, rng)), "item:" + std::to_string(i), "M",
                             "4"}),
              "1");
  for (int r = 0; r < n - 1; ++r) {
    ASSERT_EQ(run(c_.get(), {"INFER.VREM", "m4", "item:" + std::to_string(r)}), "1");
    for (int i = r + 1; i < n; ++i)
      send_command(c_.get(), {"INFER.VSIM", "m4", "ELE", "item:" + std::to_string(i), "COUNT", "3", "EF", "500"});
    for (int i = r + 1; i < n; ++i) {
      const auto items = reply_items(receive(c_.get()).get());
      ASSERT_TRUE(items.count("item:" + std::to_string(i))) << "after VREM item:" << r << ", item:" << i << " is lost";
    }
    const size_t left = static_cast<size_t>(n - r - 1);
    EXPECT_EQ(reply_items(command(c_.get(), {"INFER.VSIM", "m4", "ELE", "item:" + std::to_string(n - 1), "COUNT",
                                             "1000", "TRUTH"}).get()).size(), left);
    ASSERT_EQ(reply_items(command(c_.get(), {"INFER.VSIM", "m4", "ELE", "item:" + std::to_string(n - 1), "COUNT",
                                             "1000", "EF", "500"}).get()).size(), left)
        << "after VREM item:" << r;
  }
}

}  // namespace
}  // namespace infer::test
