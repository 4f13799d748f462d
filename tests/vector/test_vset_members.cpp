// Redis 8's member and graph commands through a real redis-server: INFER.VISMEMBER, INFER.VRANDMEMBER
// (count semantics, extreme counts), INFER.VRANGE (lexicographic bounds, paging), INFER.VLINKS (levels,
// scores, RESP3), attributes that are not JSON, Redis's error texts, and VADD ... CAS (concurrent
// clients, the set changed or replaced meanwhile, a replica and an AOF rewrite that agree with it).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
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

class VsetMembers : public SharedServerTest<VsetMembers> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  void SetUp() override {
    SharedServerTest<VsetMembers>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    run({"FLUSHALL"});
  }
  // `n` elements e0..e{n-1} of random 8-d vectors in `key`.
  void fill(const std::string& key, int n, const std::string& extra = "") {
    std::mt19937 rng(11);
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> argv = {"INFER.VADD", key, "FP32", fp32(random_vec(8, rng)), "e" + std::to_string(i)};
      if (!extra.empty()) argv.push_back(extra);
      ASSERT_EQ(run(argv), "1");
    }
  }
  std::vector<std::string> strings(const std::vector<std::string>& argv) {
    Reply r = command(c_.get(), argv);
    std::vector<std::string> out;
    if (!r || r->type != REDIS_REPLY_ARRAY) return {"not an array: " + show(r.get())};
    for (size_t i = 0; i < r->elements; ++i) out.emplace_back(r->element[i]->str, r->element[i]->len);
    return out;
  }
};

TEST_F(VsetMembers, VismemberAnswersOneOrZero) {
  fill("s", 3);
  EXPECT_EQ(run({"INFER.VISMEMBER", "s", "e1"}), "1");
  EXPECT_EQ(run({"INFER.VISMEMBER", "s", "zz"}), "0");
  EXPECT_EQ(run({"INFER.VISMEMBER", "none", "e1"}), "0");
  run({"SET", "str", "x"});
  EXPECT_NE(run({"INFER.VISMEMBER", "str", "e1"}).find("WRONGTYPE"), std::string::npos);
  EXPECT_NE(run({"INFER.VISMEMBER", "s"}).find("wrong number"), std::string::npos);
  Resp3Client c3(server_->port());
  EXPECT_EQ(c3.call({"INFER.VISMEMBER", "s", "e1"}).type, '#');
}

TEST_F(VsetMembers, VrandmemberFollowsRedisCountSemantics) {
  EXPECT_EQ(run({"INFER.VRANDMEMBER", "s"}), "(nil)");
  EXPECT_EQ(run({"INFER.VRANDMEMBER", "s", "5"}), "[]");
  fill("s", 100);
  const std::string one = run({"INFER.VRANDMEMBER", "s"});
  EXPECT_EQ(run({"INFER.VISMEMBER", "s", one}), "1") << one;
  auto ten = strings({"INFER.VRANDMEMBER", "s", "10"});
  EXPECT_EQ(ten.size(), 10u);
  EXPECT_EQ(std::set<std::string>(ten.begin(), ten.end()).size(), 10u);  // distinct
  // 60% of the set (past Redis's 20% sampling threshold) and more than the set: distinct, at most all.
  auto sixty = strings({"INFER.VRANDMEMBER", "s", "60"});
  EXPECT_EQ(std::set<std::string>(sixty.begin(), sixty.end()).size(), 60u);
  auto all = strings({"INFER.VRANDMEMBER", "s", "110"});
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), 100u);
  // Negative: exactly |count|, repeats allowed (400 draws of 100 repeat for certain).
  auto many = strings({"INFER.VRANDMEMBER", "s", "-400"});
  EXPECT_EQ(many.size(), 400u);
  EXPECT_LT(std::set<std::string>(many.begin(), many.end()).size(), 400u);
  for (const auto& m : many) ASSERT_EQ(m[0], 'e');
  EXPECT_EQ(run({"INFER.VRANDMEMBER", "s", "0"}), "[]");
  EXPECT_EQ(run({"INFER.VRANDMEMBER", "s", "x"}), "(error) ERR COUNT value is not an integer");
  // Sampling is random: 20 single draws from 100 are not all the same.
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) seen.insert(run({"INFER.VRANDMEMBER", "s"}));
  EXPECT_GT(seen.size(), 1u);
}

TEST_F(VsetMembers, VrandmemberExtremeCountsAreRefusedWithoutWork) {
  fill("s", 5);
  for (const char* count : {"-9223372036854775808", "-9223372036854775807", "-65537", "-1000000000000"}) {
    const std::string r = run({"INFER.VRANDMEMBER", "s", count});
    EXPECT_NE(r.find("more than the 65536 a reply may hold"), std::string::npos) << count << ": " << r;
  }
  // A positive count is capped at the set's size first, as in Redis.
  EXPECT_EQ(strings({"INFER.VRANDMEMBER", "s", "9223372036854775807"}).size(), 5u);
  EXPECT_EQ(strings({"INFER.VRANDMEMBER", "s", "-65536"}).size(), 65536u);
  EXPECT_NE(run({"INFER.VRANDMEMBER", "s", "99999999999999999999"}).find("not an integer"), std::string::npos);
  EXPECT_EQ(run({"PING"}), "PONG");
}

TEST_F(VsetMembers, VrangeWalksNamesInByteOrder) {
  const std::vector<std::string> fruit = {"apple", "apricot", "banana", "cherry", "date", "fig", "grape", "kiwi"};
  for (const auto& f : fruit) ASSERT_EQ(run({"INFER.VADD", "s", "VALUES", "2", "1", "0", f}), "1");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "-", "+"}), "[apple, apricot, banana, cherry, date, fig, grape, kiwi]");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "[apple", "[grape", "3"}), "[apple, apricot, banana]");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "(apple", "[cherry"}), "[apricot, banana, cherry]");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "[banana", "(cherry"}), "[banana]");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "[app", "[apr"}), "[apple]");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "[cherry", "[cherry"}), "[cherry]");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "[grape", "[apple"}), "[]");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "[zebra", "+"}), "[]");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "-", "+", "0"}), "[]");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "-", "+", "-1"}).size(), run({"INFER.VRANGE", "s", "-", "+"}).size());
  EXPECT_EQ(run({"INFER.VRANGE", "none", "-", "+"}), "[]");
  // Paging with an exclusive start visits every element once, and follows removals and additions.
  run({"INFER.VREM", "s", "date"});
  run({"INFER.VADD", "s", "VALUES", "2", "0", "1", "coconut"});
  std::vector<std::string> paged;
  for (std::string from = "-";;) {
    auto page = strings({"INFER.VRANGE", "s", from, "+", "3"});
    paged.insert(paged.end(), page.begin(), page.end());
    if (page.size() < 3) break;
    from = "(" + page.back();
  }
  EXPECT_EQ(paged, (std::vector<std::string>{"apple", "apricot", "banana", "cherry", "coconut", "fig", "grape", "kiwi"}));
  // Byte order: bytes above 0x7f sort after ASCII.
  run({"INFER.VADD", "s", "VALUES", "2", "1", "1", "\xc3\xa9t\xc3\xa9"});
  EXPECT_EQ(strings({"INFER.VRANGE", "s", "(kiwi", "+"}), std::vector<std::string>{"\xc3\xa9t\xc3\xa9"});
  // Redis 8's errors.
  EXPECT_EQ(run({"INFER.VRANGE", "s", "apple", "+"}), "(error) ERR invalid start range format");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "-", "["}), "(error) ERR invalid end range format");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "+", "-"}), "(error) ERR '-' can only be used as first argument, '+' only as second");
  EXPECT_EQ(run({"INFER.VRANGE", "s", "-", "+", "x"}), "(error) ERR invalid COUNT value");
  EXPECT_NE(run({"INFER.VRANGE", "s", "-"}).find("wrong number"), std::string::npos);
}

TEST_F(VsetMembers, RepliesOfMoreThanAReplyMayHoldAreRefused) {
  // 65 names of 64 KiB: their 4.06 MiB pass the 4 MiB a reply may hold. A COUNT pages.
  for (int i = 0; i < 65; ++i) {
    std::string name(65536, 'a' + i % 26);
    name.replace(0, 4, std::to_string(1000 + i));
    ASSERT_EQ(run({"INFER.VADD", "big", "VALUES", "1", "1", name, "M", "4", "EF", "4"}), "1");
  }
  const std::string r = run({"INFER.VRANGE", "big", "-", "+"});
  EXPECT_NE(r.find("bytes of element names, more than the 4194304 a reply may hold; give a COUNT"), std::string::npos)
      << r.substr(0, 200);
  EXPECT_EQ(strings({"INFER.VRANGE", "big", "-", "+", "50"}).size(), 50u);
  EXPECT_NE(run({"INFER.VRANDMEMBER", "big", "-66"}).find("bytes of element names"), std::string::npos);
  EXPECT_EQ(strings({"INFER.VRANDMEMBER", "big", "-60"}).size(), 60u);
}

TEST_F(VsetMembers, VlinksListsEachLevelWithScores) {
  fill("s", 300);
  EXPECT_EQ(run({"INFER.VLINKS", "none", "e1"}), "(nil)");
  EXPECT_EQ(run({"INFER.VLINKS", "s", "zz"}), "(nil)");
  EXPECT_NE(run({"INFER.VLINKS", "s", "e1", "BOGUS"}).find("wrong number"), std::string::npos);
  // Some element has an upper level; its reply has one array per level, highest first, level 0 last
  // and the longest (2·M links against M).
  const std::string max_level = run({"INFER.VINFO", "s"});
  bool found_upper = false;
  for (int i = 0; i < 300 && !found_upper; ++i) {
    Reply r = command(c_.get(), {"INFER.VLINKS", "s", "e" + std::to_string(i)});
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    ASSERT_GE(r->elements, 1u);
    const redisReply* level0 = r->element[r->elements - 1];
    EXPECT_GE(level0->elements, 1u);
    EXPECT_LE(level0->elements, 32u);
    for (size_t l = 0; l + 1 < r->elements; ++l) EXPECT_LE(r->element[l]->elements, 16u);
    if (r->elements > 1) found_upper = true;
  }
  EXPECT_TRUE(found_upper) << max_level;
  // WITHSCORES: name, similarity pairs (RESP2), the similarity VSIM gives for the same pair.
  Reply w = command(c_.get(), {"INFER.VLINKS", "s", "e0", "WITHSCORES"});
  ASSERT_EQ(w->type, REDIS_REPLY_ARRAY);
  const redisReply* l0 = w->element[w->elements - 1];
  ASSERT_EQ(l0->elements % 2, 0u);
  const std::string nb(l0->element[0]->str, l0->element[0]->len);
  const double score = std::stod(l0->element[1]->str);
  Reply v = command(c_.get(), {"INFER.VSIM", "s", "ELE", "e0", "COUNT", "300", "EF", "300", "WITHSCORES", "TRUTH"});
  bool compared = false;
  for (size_t i = 0; i + 1 < v->elements; i += 2)
    if (std::string(v->element[i]->str, v->element[i]->len) == nb) {
      EXPECT_NEAR(std::stod(v->element[i + 1]->str), score, 1e-6);
      compared = true;
    }
  EXPECT_TRUE(compared);
  // RESP3: an array of maps from neighbour to a double.
  Resp3Client c3(server_->port());
  Resp3Value r3 = c3.call({"INFER.VLINKS", "s", "e0", "WITHSCORES"});
  ASSERT_EQ(r3.type, '*');
  ASSERT_EQ(r3.elems.back().type, '%');
  EXPECT_EQ(r3.elems.back().elems[1].type, ',');
  EXPECT_EQ(c3.call({"INFER.VLINKS", "s", "e0"}).elems.back().type, '*');
}

TEST_F(VsetMembers, AttributesThatAreNotJsonAreStoredAndNeverMatch) {
  fill("s", 3);
  EXPECT_EQ(run({"INFER.VSETATTR", "s", "e0", "not json {"}), "1");
  EXPECT_EQ(run({"INFER.VGETATTR", "s", "e0"}), "not json {");
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "8", "1", "0", "0", "0", "0", "0", "0", "0", "x", "SETATTR", "[1,"}), "1");
  EXPECT_EQ(run({"INFER.VSETATTR", "s", "e1", R"({"a": 1})"}), "1");
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "e1", "FILTER", ".a == 1"}), "[e1]");
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "e1", "FILTER", ".a == 1", "TRUTH"}), "[e1]");
  EXPECT_NE(run({"INFER.VINFO", "s"}).find("attributes-count, 3"), std::string::npos);
}

TEST_F(VsetMembers, ErrorTextsAreRedis8s) {
  fill("s", 2);
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "e0", "EF", "1000001"}).rfind("(error) ERR invalid EF", 0), 0u);
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "e0", "COUNT", "0"}).rfind("(error) ERR invalid COUNT", 0), 0u);
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "e0", "EPSILON", "x"}).rfind("(error) ERR invalid EPSILON", 0), 0u);
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "e0", "FILTER-EF", "0"}).rfind("(error) ERR invalid FILTER-EF", 0), 0u);
  EXPECT_EQ(run({"INFER.VSIM", "s", "ELE", "e0", "BOGUS"}).rfind("(error) ERR syntax error in VSIM command", 0), 0u);
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "8", "1", "0", "0", "0", "0", "0", "0", "0", "x", "EF", "0"})
                .rfind("(error) ERR invalid EF", 0),
            0u);
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "8", "1", "0", "0", "0", "0", "0", "0", "0", "x", "BOGUS"})
                .rfind("(error) ERR invalid option after element", 0),
            0u);
  EXPECT_EQ(run({"INFER.VSIM", "s", "VALUES", "2", "1", "0"}), "(error) ERR Vector dimension mismatch - got 2 but set has 8");
  std::mt19937 rng(3);
  ASSERT_EQ(run({"INFER.VADD", "r", "REDUCE", "4", "FP32", fp32(random_vec(10, rng)), "a"}), "1");
  EXPECT_EQ(run({"INFER.VADD", "r", "FP32", fp32(random_vec(8, rng)), "b"})
                .rfind("(error) ERR Input dimension mismatch for projection - got 8 but projection expects 10", 0),
            0u);
  EXPECT_EQ(run({"INFER.VSIM", "r", "FP32", fp32(random_vec(8, rng))})
                .rfind("(error) ERR Input dimension mismatch for projection - got 8 but projection expects 10", 0),
            0u);
}

TEST_F(VsetMembers, KeySpecsLetReadersReadAndRefuseOtherKeys) {
  fill("s", 3);
  fill("other", 1);
  ASSERT_EQ(run({"ACL", "SETUSER", "member-reader", "on", ">pw", "%R~s", "+@all"}), "OK");
  RedisConn r = server_->connect();
  ASSERT_EQ(show(command(r.get(), {"AUTH", "member-reader", "pw"}).get()), "OK");
  auto as_reader = [&](const std::vector<std::string>& argv) { return show(command(r.get(), argv).get()); };
  EXPECT_EQ(as_reader({"INFER.VISMEMBER", "s", "e0"}), "1");
  EXPECT_EQ(as_reader({"INFER.VRANGE", "s", "-", "+"}), "[e0, e1, e2]");
  EXPECT_EQ(as_reader({"INFER.VRANDMEMBER", "s", "-1"}).front(), '[');
  EXPECT_EQ(as_reader({"INFER.VLINKS", "s", "e0"}).front(), '[');
  for (const auto& argv : std::vector<std::vector<std::string>>{{"INFER.VISMEMBER", "other", "e0"},
                                                                 {"INFER.VRANDMEMBER", "other"},
                                                                 {"INFER.VRANGE", "other", "-", "+"},
                                                                 {"INFER.VLINKS", "other", "e0"},
                                                                 {"INFER.VADD", "s", "VALUES", "8", "1", "0", "0", "0",
                                                                  "0", "0", "0", "0", "w", "CAS"}})
    EXPECT_NE(as_reader(argv).find("NOPERM"), std::string::npos) << argv[0];
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.VRANGE", "s", "-", "+"}), "[s]");
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.VLINKS", "s", "e0", "WITHSCORES"}), "[s]");
  run({"ACL", "DELUSER", "member-reader"});
}

TEST_F(VsetMembers, CasInsertsFromConcurrentClientsAllLand) {
  fill("s", 1);
  constexpr int kClients = 4, kEach = 150;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t)
    threads.emplace_back([&, t] {
      RedisConn c = server_->connect();
      std::mt19937 rng(100 + t);
      for (int i = 0; i < kEach; ++i) {
        Reply r = command(c.get(), {"INFER.VADD", "s", "FP32", fp32(random_vec(8, rng)),
                                    "c" + std::to_string(t) + "-" + std::to_string(i), "CAS", "SETATTR", "{\"t\":1}"});
        EXPECT_EQ(show(r.get()), "1");
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(run({"INFER.VCARD", "s"}), std::to_string(1 + kClients * kEach));
  EXPECT_NE(run({"INFER.VINFO", "s"}).find("attributes-count, 600"), std::string::npos);
  // Every element is found by its own vector, and CAS on an existing element updates it synchronously.
  std::mt19937 rng(100);
  const auto v = random_vec(8, rng);
  EXPECT_EQ(run({"INFER.VSIM", "s", "FP32", fp32(v), "COUNT", "1"}), "[c0-0]");
  EXPECT_EQ(run({"INFER.VADD", "s", "VALUES", "8", "1", "0", "0", "0", "0", "0", "0", "0", "c0-0", "CAS"}), "0");
  // Inside MULTI it runs synchronously and replies as VADD does.
  EXPECT_EQ(run({"MULTI"}), "OK");
  run({"INFER.VADD", "s", "VALUES", "8", "0", "1", "0", "0", "0", "0", "0", "0", "m", "CAS"});
  EXPECT_EQ(run({"EXEC"}), "[1]");
}

TEST_F(VsetMembers, CasAfterTheKeyWasReplacedAddsNothing) {
  // A pipeline: the CAS insert's commit comes after the DEL and the new set; Redis 8 then pretends the
  // VADD ran first: it replies 1 and the new set does not get the element.
  fill("s", 20);
  send_command(c_.get(), {"INFER.VADD", "s", "VALUES", "8", "1", "0", "0", "0", "0", "0", "0", "0", "late", "CAS"});
  RedisConn other = server_->connect();
  EXPECT_EQ(show(command(other.get(), {"DEL", "s"}).get()), "1");
  EXPECT_EQ(show(command(other.get(), {"INFER.VADD", "s", "VALUES", "8", "0", "1", "0", "0", "0", "0", "0", "0",
                                       "fresh"}).get()),
            "1");
  EXPECT_EQ(show(receive(c_.get()).get()), "1");
  // Whether the commit came before the DEL (which took it away) or after the new set replaced the one
  // searched (nothing added), only the new set's element is there.
  EXPECT_EQ(run({"INFER.VRANGE", "s", "-", "+"}), "[fresh]");
}

// VLINKS of every element, in name order: the whole graph as clients see it.
std::string graph(redisContext* c, const std::string& key) {
  std::string out;
  Reply names = command(c, {"INFER.VRANGE", key, "-", "+"});
  for (size_t i = 0; i < names->elements; ++i) {
    const std::string n(names->element[i]->str, names->element[i]->len);
    out += n + " " + show(command(c, {"INFER.VLINKS", key, n}).get()) + " " +
           show(command(c, {"INFER.VGETATTR", key, n}).get()) + "\n";
  }
  return out;
}

TEST(VsetMembersReplication, CasInsertsAndNonJsonAttributesReachTheReplicaTheAofAndTheRdb) {
  INFER_REQUIRE_DIR(models_dir());
  char tmpl[] = "/tmp/infer-vsetcas-XXXXXX";
  const std::filesystem::path dir = mkdtemp(tmpl);
  const std::vector<std::string> args = {"--dir", dir.string(), "--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                                         "--enable-debug-command", "yes"};
  std::string before, names;
  {
    RedisServer master({.server_args = args});
    RedisConn m = master.connect();
    RedisServer replica({.server_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}});
    RedisConn r = replica.connect();
    std::mt19937 rng(5);
    ASSERT_EQ(show(command(m.get(), {"INFER.VADD", "s", "FP32", fp32(random_vec(8, rng)), "first"}).get()), "1");
    // Two clients insert with CAS at once: the master commits them in some order, the replica applies
    // that order without CAS, and both graphs are the same link for link.
    std::vector<std::thread> clients;
    for (int t = 0; t < 2; ++t)
      clients.emplace_back([&, t] {
        RedisConn c = master.connect();
        std::mt19937 local(50 + t);
        for (int i = 0; i < 120; ++i)
          EXPECT_EQ(show(command(c.get(), {"INFER.VADD", "s", "FP32", fp32(random_vec(8, local)),
                                           "c" + std::to_string(t) + "-" + std::to_string(i), "CAS"})
                             .get()),
                    "1");
      });
    for (auto& th : clients) th.join();
    ASSERT_EQ(show(command(m.get(), {"INFER.VADD", "s", "FP32", fp32(random_vec(8, rng)), "x", "CAS", "SETATTR",
                                     "plain text"}).get()),
              "1");
    ASSERT_EQ(show(command(m.get(), {"INFER.VSETATTR", "s", "first", "{oops"}).get()), "1");
    ASSERT_EQ(show(command(m.get(), {"WAIT", "1", "10000"}).get()), "1");
    before = graph(m.get(), "s");
    names = show(command(m.get(), {"INFER.VRANGE", "s", "-", "+"}).get());
    EXPECT_NE(before.find("x ["), std::string::npos);
    EXPECT_NE(before.find("plain text"), std::string::npos);
    EXPECT_EQ(graph(r.get(), "s"), before);
    // RDB: DEBUG RELOAD saves and loads the graph as it is.
    EXPECT_EQ(show(command(m.get(), {"DEBUG", "RELOAD"}).get()), "OK");
    EXPECT_EQ(graph(m.get(), "s"), before);
    EXPECT_EQ(show(command(m.get(), {"BGREWRITEAOF"}).get()), "Background append only file rewriting started");
    for (int i = 0; i < 500 && info_number(m.get(), "persistence", "aof_rewrite_in_progress") != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(info_number(m.get(), "persistence", "aof_rewrite_in_progress"), 0);
  }
  // The rewritten AOF rebuilds the set from its elements: the same names and attributes (the graph is
  // rebuilt by plain inserts, so links may differ).
  RedisServer again({.server_args = args});
  RedisConn c = again.connect();
  EXPECT_EQ(show(command(c.get(), {"INFER.VRANGE", "s", "-", "+"}).get()), names);
  EXPECT_EQ(show(command(c.get(), {"INFER.VCARD", "s"}).get()), "242");
  EXPECT_EQ(show(command(c.get(), {"INFER.VGETATTR", "s", "x"}).get()), "plain text");
  EXPECT_EQ(show(command(c.get(), {"INFER.VGETATTR", "s", "first"}).get()), "{oops");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace infer::test
