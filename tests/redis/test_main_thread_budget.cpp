// The main-thread budget (DESIGN invariant 5): every INFER.* command at the largest inputs a client can
// send (arguments at the server's proto-max-bulk-len, FILTERs at their node limit over long attributes,
// COUNT/EF at their maximum, many keys, inside MULTI and EVAL) must not hold Redis's main thread. Two
// measures, both against a real redis-server:
//  - the module's own: INFER.STATS main_thread_us, the longest CPU time of one call of each command and
//    callback, must stay under kCpuBoundUs (the aim of the issue, 10 ms; CPU time, so a loaded machine
//    does not make it flaky);
//  - a second client's: PING round trips measured throughout must stay under kPingBound, and so must the
//    wall-clock max_main_thread_stall_us of INFO infer (a looser bound: the wall clock includes time the
//    thread was preempted on a shared 2-core machine; it catches the seconds-long stalls).
// proto-max-bulk-len is lowered to kBulk so that "the largest argument" is one a test can send quickly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kBulk = 16u << 20;  // the server's proto-max-bulk-len in this suite
constexpr long long kCpuBoundUs = kSanitizerBuild ? 250000 : 10000;  // TSan runs the module 5-15x slower
constexpr auto kPingBound = milliseconds(kSanitizerBuild ? 2000 : 250);

std::string words(size_t bytes) {
  std::string t;
  t.reserve(bytes + 80);
  while (t.size() < bytes) t += "Once upon a time, there was a little girl named Lily who loved the park. ";
  t.resize(bytes);
  return t;
}

// A client that PINGs in a loop and keeps the longest round trip.
class Pinger {
 public:
  explicit Pinger(const RedisServer& s) : conn_(s.connect(60000)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        const auto t0 = Clock::now();
        Reply r = command(conn_.get(), {"PING"});
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
        if (!r) failed_ = true;
        if (us > worst_us_) worst_us_ = us;
        std::this_thread::sleep_for(milliseconds(1));
      }
    });
  }
  ~Pinger() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  long long worst_us() const { return worst_us_; }
  bool failed() const { return failed_; }

 private:
  RedisConn conn_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::atomic<long long> worst_us_{0};
};

struct Timing {
  long long max_us = 0, max_cpu_us = 0;
};

// INFER.STATS main_thread_us (RESP2: flat key/value arrays) by command or callback name.
std::map<std::string, Timing> main_thread_timings(redisContext* c) {
  std::map<std::string, Timing> out;
  Reply r = command(c, {"INFER.STATS"});
  if (!r || r->type != REDIS_REPLY_ARRAY) return out;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    if (std::string(r->element[i]->str, r->element[i]->len) != "main_thread_us") continue;
    const redisReply* by_name = r->element[i + 1];
    for (size_t j = 0; j + 1 < by_name->elements; j += 2) {
      Timing t;
      const redisReply* fields = by_name->element[j + 1];
      for (size_t k = 0; k + 1 < fields->elements; k += 2) {
        const std::string f(fields->element[k]->str, fields->element[k]->len);
        if (f == "max_us") t.max_us = fields->element[k + 1]->integer;
        if (f == "max_cpu_us") t.max_cpu_us = fields->element[k + 1]->integer;
      }
      out[std::string(by_name->element[j]->str, by_name->element[j]->len)] = t;
    }
  }
  return out;
}

class MainThreadBudget : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new RedisServer({.module_args = {"MODEL", "stories", stories_model_path(), "THREADS", "1"},
                               .server_args = {"--proto-max-bulk-len", std::to_string(kBulk),
                                               "--client-query-buffer-limit", std::to_string(4 * kBulk)},
                               .start_timeout_ms = 30000});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    INFER_REQUIRE_DIR(models_dir());
    c_ = server_->connect(120000);
    before_ = main_thread_timings(c_.get());
    stall_before_ = info_number(c_.get(), "infer", "infer_max_main_thread_stall_us");
    pinger_ = std::make_unique<Pinger>(*server_);
  }
  // Every command and callback of this test stayed within the budget, and so did PING. The counters
  // keep the maximum since the server started: a test is judged by the ones it raised.
  void TearDown() override {
    pinger_->stop();
    EXPECT_FALSE(pinger_->failed());
    const long long ping_bound_us = std::chrono::duration_cast<std::chrono::microseconds>(kPingBound).count();
    EXPECT_LT(pinger_->worst_us(), ping_bound_us) << "a PING waited this long (us) for the main thread";
    for (const auto& [name, t] : main_thread_timings(c_.get())) {
      if (t.max_cpu_us == before_[name].max_cpu_us) continue;
      std::printf("main thread: %s at most %lld us of CPU\n", name.c_str(), t.max_cpu_us);
      EXPECT_LE(t.max_cpu_us, kCpuBoundUs) << name << " held the main thread for " << t.max_cpu_us << " us of CPU";
    }
    const long long stall = info_number(c_.get(), "infer", "infer_max_main_thread_stall_us");
    EXPECT_GE(stall, 0);
    if (stall != stall_before_) {
      EXPECT_LT(stall, ping_bound_us) << "INFO infer's max_main_thread_stall_us";
    }
    EXPECT_EQ(show(command(c_.get(), {"PING"}).get()), "PONG");
  }
  std::string run(const std::vector<std::string>& argv) { return show(command(c_.get(), argv).get()); }

  static inline RedisServer* server_ = nullptr;
  RedisConn c_;
  std::unique_ptr<Pinger> pinger_;
  std::map<std::string, Timing> before_;
  long long stall_before_ = 0;
};

TEST_F(MainThreadBudget, GenerateWithAPromptAtTheBulkLimitIsRefusedQuickly) {
  const std::string big = words(kBulk);
  const auto t0 = Clock::now();
  const std::string r = run({"INFER.GENERATE", "stories", "PROMPT", big, "MAXTOKENS", "4"});
  EXPECT_EQ(r.rfind("(error)", 0), 0u) << r.substr(0, 200);
  EXPECT_NE(r.find("context"), std::string::npos) << r.substr(0, 200);
  // Tokenising stops once the prompt cannot fit: well under the seconds a whole encode takes.
  EXPECT_LT(Clock::now() - t0, milliseconds(kSanitizerBuild ? 20000 : 2000));
  // The same as a suffix to token keys.
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "budget:tk"}), "5");
  const std::string s = run({"INFER.GENERATE", "stories", "TOKENS", "budget:tk", "PROMPT", big, "MAXTOKENS", "4"});
  EXPECT_NE(s.find("context"), std::string::npos) << s.substr(0, 200);
}

TEST_F(MainThreadBudget, ShortGenerationsAreNotQueuedBehindALongPrompt) {
  RedisConn slow = server_->connect(120000);
  send_command(slow.get(), {"INFER.TOKENIZE", "stories", words(kBulk / 2), "STORE", "budget:long"});
  std::this_thread::sleep_for(milliseconds(50));  // the long text is being tokenised now
  const auto t0 = Clock::now();
  const std::string r = run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "2", "TEMP", "0"});
  const auto waited = Clock::now() - t0;
  EXPECT_EQ(r.find("(error)"), std::string::npos) << r;
  EXPECT_LT(waited, milliseconds(kSanitizerBuild ? 5000 : 500));
  Reply done = receive(slow.get());
  ASSERT_TRUE(done);
  EXPECT_EQ(done->type, REDIS_REPLY_INTEGER) << show(done.get());
}

TEST_F(MainThreadBudget, TokenizeAtTheBulkLimitRunsOffTheMainThread) {
  const std::string r = run({"INFER.TOKENIZE", "stories", words(kBulk), "STORE", "budget:tok"});
  EXPECT_EQ(r.find("(error)"), std::string::npos) << r.substr(0, 200);
  EXPECT_GT(std::atoll(r.c_str()), 1000000);
}

TEST_F(MainThreadBudget, TokenizeRepliesAtMostTheReplyLimit) {
  // The ids are written by the reply callback on the main thread: a text of more tokens than a reply may
  // hold is refused (STORE takes any length), one of fewer is answered whole.
  const std::string r = run({"INFER.TOKENIZE", "stories", words(4u << 20)});
  EXPECT_NE(r.find("more than the 131072 a reply may hold; STORE them"), std::string::npos) << r.substr(0, 200);
  Reply ok = command(c_.get(), {"INFER.TOKENIZE", "stories", words(300000)});
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->type, REDIS_REPLY_ARRAY) << show(ok.get()).substr(0, 200);
  EXPECT_GT(ok->elements, 75000u);
  EXPECT_LE(ok->elements, 131072u);
}

TEST_F(MainThreadBudget, InlineFormsInMultiAndEvalAreBoundedByTheirByteLimit) {
  // Past the inline limit the command is refused with an error that names it; at it, it runs within budget.
  const std::string big = words(kBulk);
  EXPECT_EQ(run({"MULTI"}), "OK");
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", big}), "QUEUED");
  const std::string multi = run({"EXEC"});
  EXPECT_NE(multi.find("inline"), std::string::npos) << multi.substr(0, 300);
  const std::string lua =
      run({"EVAL", "return redis.pcall('INFER.TOKENIZE', 'stories', ARGV[1])", "0", big});
  EXPECT_NE(lua.find("inline"), std::string::npos) << lua.substr(0, 300);
  const std::string embed = run({"EVAL", "return redis.pcall('INFER.EMBED', 'stories', ARGV[1])", "0", big});
  EXPECT_EQ(embed.rfind("(error)", 0), 0u) << embed.substr(0, 300);
}

TEST_F(MainThreadBudget, EmbedAndRagWithArgumentsAtTheBulkLimit) {
  const std::string big = words(kBulk);
  const std::string e = run({"INFER.EMBED", "stories", big});
  EXPECT_EQ(e.rfind("(error)", 0), 0u) << e.substr(0, 200);
  EXPECT_EQ(run({"INFER.EMBED", "stories", "A little bird sang.", "STORE", "budget:kb", "bird",
                 "SETATTR", R"({"tokens":"budget:tk"})"}).find("(error)"),
            std::string::npos);
  const std::string rag = run({"INFER.RAG", "stories", "budget:kb", "QUERY", big, "MAXTOKENS", "2"});
  EXPECT_EQ(rag.rfind("(error)", 0), 0u) << rag.substr(0, 200);
}

TEST_F(MainThreadBudget, DetokenizeOfTheLongestIdList) {
  // A million ids as arguments: refused from their count, as a KEY is from its size, before parsing.
  std::vector<std::string> argv = {"INFER.DETOKENIZE", "stories"};
  for (int i = 0; i < 1000000; ++i) argv.push_back(std::to_string(100 + i % 300));
  const std::string r = run(argv);
  EXPECT_NE(r.find("more than the model's context"), std::string::npos) << r.substr(0, 200);
}

TEST_F(MainThreadBudget, VsimFilterOfLongStringsOverLongAttributes) {
  // The issue's case: 999 elements with a 1,001-byte attribute, ten `in` terms of 20,000 bytes each (a
  // naive substring search compares about 1,000 bytes at each of the 20,000 places).
  const std::string attr = R"({"s":")" + std::string(1000, 'a') + R"(b"})";
  for (int i = 0; i < 999; ++i) {
    ASSERT_EQ(run({"INFER.VADD", "budget:v", "VALUES", "3", std::to_string(1 + i % 7), std::to_string(i % 5),
                   "1", "e" + std::to_string(i), "SETATTR", attr}),
              "1");
  }
  std::string filter;
  for (int t = 0; t < 10; ++t) filter += std::string(t ? " or " : "") + ".s in \"" + std::string(20000, 'a') + "\"";
  for (const char* extra : {"", "NOTHREAD"}) {
    std::vector<std::string> argv = {"INFER.VSIM", "budget:v", "VALUES", "3", "1", "1", "1", "COUNT", "1000",
                                     "FILTER", filter, "FILTER-EF", "100000000"};
    if (*extra) argv.push_back(extra);
    Reply r = command(c_.get(), argv);
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->type == REDIS_REPLY_ARRAY || r->type == REDIS_REPLY_ERROR) << show(r.get()).substr(0, 200);
  }
  // An expression is parsed on the main thread: past 1 MiB it is refused.
  const std::string huge = ".s in \"" + std::string(kBulk - 16, 'a') + "\"";
  const std::string refused = run({"INFER.VSIM", "budget:v", "VALUES", "3", "1", "1", "1", "FILTER", huge});
  EXPECT_NE(refused.find("bytes is longer than 1048576"), std::string::npos) << refused.substr(0, 200);
  // And through MULTI, where nothing can block.
  EXPECT_EQ(run({"MULTI"}), "OK");
  run({"INFER.VSIM", "budget:v", "VALUES", "3", "1", "1", "1", "COUNT", "1000", "FILTER", filter});
  run({"EXEC"});
}

TEST_F(MainThreadBudget, VsimAtTheLargestCountAndEf) {
  for (int i = 0; i < 3000; ++i)
    ASSERT_EQ(run({"INFER.VADD", "budget:big", "VALUES", "3", std::to_string(i % 11), std::to_string(i % 13),
                   std::to_string(i % 17 + 1), "e" + std::to_string(i)}),
              "1");
  for (const char* extra : {"", "NOTHREAD", "TRUTH"}) {
    std::vector<std::string> argv = {"INFER.VSIM", "budget:big", "VALUES", "3", "1", "2", "3", "COUNT", "1000000",
                                     "EF", "1000000", "WITHSCORES", "WITHATTRIBS"};
    if (*extra) argv.push_back(extra);
    const std::string r = run(argv);
    EXPECT_EQ(r.find("(error)"), std::string::npos) << r.substr(0, 200);
  }
  // The largest random draw (a larger one is refused before any work) and every element's links.
  EXPECT_EQ(command(c_.get(), {"INFER.VRANDMEMBER", "budget:big", "-65536"})->elements, 65536u);
  EXPECT_NE(run({"INFER.VRANDMEMBER", "budget:big", "-9223372036854775808"}).find("a reply may hold"),
            std::string::npos);
  EXPECT_EQ(command(c_.get(), {"INFER.VRANDMEMBER", "budget:big", "9223372036854775807"})->elements, 3000u);
  EXPECT_EQ(run({"INFER.VLINKS", "budget:big", "e1", "WITHSCORES"}).find("(error)"), std::string::npos);
  EXPECT_EQ(command(c_.get(), {"INFER.VRANGE", "budget:big", "-", "+", "-1"})->elements, 3000u);
}

TEST_F(MainThreadBudget, VaddAndVsetattrAtTheirLargestArguments) {
  // The largest dimension (65,536), as FP32 and as VALUES, and an attribute at the bulk limit.
  std::string blob(65536 * 4, '\0');
  for (size_t i = 0; i < 65536; ++i) {
    const float f = static_cast<float>(i % 7) - 3.0f;
    std::memcpy(blob.data() + i * 4, &f, 4);
  }
  EXPECT_EQ(run({"INFER.VADD", "budget:wide", "FP32", blob, "a"}), "1");
  std::vector<std::string> values = {"INFER.VADD", "budget:wide", "VALUES", "65536"};
  for (size_t i = 0; i < 65536; ++i) values.push_back(std::to_string(static_cast<int>(i % 5) - 2));
  values.push_back("b");
  EXPECT_EQ(show(command(c_.get(), values).get()), "1");
  EXPECT_EQ(run({"INFER.VSIM", "budget:wide", "ELE", "a", "COUNT", "2"}).find("(error)"), std::string::npos);
  // Attributes are checked as JSON on the main thread: past infer.max-attribute-bytes they are refused.
  const std::string json = R"({"s":")" + std::string(kBulk - 16, 'x') + R"("})";
  const std::string r = run({"INFER.VSETATTR", "budget:wide", "a", json});
  EXPECT_NE(r.find("exceed infer.max-attribute-bytes"), std::string::npos) << r.substr(0, 200);
  const std::string vadd = run({"INFER.VADD", "budget:wide", "FP32", blob, "c", "SETATTR", json});
  EXPECT_NE(vadd.find("exceed infer.max-attribute-bytes"), std::string::npos) << vadd.substr(0, 200);
  const std::string at_limit = R"({"s":")" + std::string((512 << 10) - 8, 'x') + R"("})";
  ASSERT_EQ(at_limit.size(), 512u << 10);
  EXPECT_EQ(run({"INFER.VSETATTR", "budget:wide", "a", at_limit}), "1");
  EXPECT_EQ(run({"INFER.VGETATTR", "budget:wide", "a"}).size(), at_limit.size());
}

TEST_F(MainThreadBudget, VaddAcrossAGrowthBoundaryOfAWideSet) {
  // M 4096 gives every node 32 KiB of level-0 links: growing a flat buffer past 2,048 nodes would copy
  // 64 MiB in one VADD.
  for (int i = 0; i < 2100; ++i)
    ASSERT_EQ(run({"INFER.VADD", "budget:m", "VALUES", "3", std::to_string(i % 11), std::to_string(i % 13),
                   std::to_string(i % 17 + 1), "e" + std::to_string(i), "M", "4096"}),
              "1");
  EXPECT_EQ(run({"INFER.VCARD", "budget:m"}), "2100");
}

// A 65,536-d vector of uniform components in [-1, 1], different for each `e`, as an FP32 blob.
std::string wide_blob(int e) {
  constexpr size_t kDim = 65536;
  std::string blob(kDim * 4, '\0');
  uint64_t x = 0xd1b54a32d192ed03ULL * static_cast<uint64_t>(e + 1);
  for (size_t i = 0; i < kDim; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const float f = static_cast<float>(x % 2001) / 1000.0f - 1.0f;
    std::memcpy(blob.data() + i * 4, &f, 4);
  }
  return blob;
}

TEST_F(MainThreadBudget, VaddOfTheWidestNoquantVectorsIntoAFewHundred) {
  // An insert's candidate search at EF 200 visits nearly every node of a few hundred, and the neighbour
  // selection compares candidates pairwise: at 65,536-d float32 (256 KiB a vector) each VADD must still
  // bound its own work. 300 distinct vectors; every one is still found by its own vector.
  constexpr int kCount = 300;
  for (int e = 0; e < kCount; ++e)
    ASSERT_EQ(run({"INFER.VADD", "budget:wide-nq", "FP32", wide_blob(e), "e" + std::to_string(e), "NOQUANT"}), "1") << e;
  EXPECT_EQ(run({"INFER.VCARD", "budget:wide-nq"}), std::to_string(kCount));
  for (int e = 0; e < kCount; e += 37) {
    Reply r = command(c_.get(), {"INFER.VSIM", "budget:wide-nq", "FP32", wide_blob(e), "COUNT", "1"});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    ASSERT_EQ(r->elements, 1u);
    EXPECT_EQ(std::string(r->element[0]->str, r->element[0]->len), "e" + std::to_string(e));
  }
  // An exact scan compares all 300 (75 MiB of vectors): on the search threads when the client may
  // block, refused where it cannot, though the set is under vsim-thread-threshold.
  const std::string truth = run({"INFER.VSIM", "budget:wide-nq", "ELE", "e7", "COUNT", "1", "TRUTH"});
  EXPECT_EQ(truth, "[e7]");
  const std::string refusal = "MiB a search may on Redis's main thread";
  const std::string nothread = run({"INFER.VSIM", "budget:wide-nq", "ELE", "e7", "TRUTH", "NOTHREAD"});
  EXPECT_NE(nothread.find(refusal), std::string::npos) << nothread.substr(0, 200);
  EXPECT_EQ(run({"MULTI"}), "OK");
  run({"INFER.VSIM", "budget:wide-nq", "ELE", "e7", "TRUTH"});
  const std::string exec = run({"EXEC"});
  EXPECT_NE(exec.find(refusal), std::string::npos) << exec.substr(0, 200);
  const std::string lua = run({"EVAL", "return redis.pcall('INFER.VSIM', KEYS[1], 'ELE', 'e7', 'EF', '1000')", "1",
                               "budget:wide-nq"});
  EXPECT_NE(lua.find(refusal), std::string::npos) << lua.substr(0, 200);
  // INFER.RAG searches on the main thread: the same bound.
  const std::string rag = run({"INFER.RAG", "stories", "budget:wide-nq", "FP32", wide_blob(7), "QUESTION", "which?",
                               "EF", "1000", "MAXTOKENS", "4"});
  EXPECT_NE(rag.find(refusal), std::string::npos) << rag.substr(0, 200);
}

TEST_F(MainThreadBudget, VremAtTheLargestM) {
  // A removal reconnects the removed element's neighbours and checks that each stays reachable; at a
  // large M nothing bounds a node's links but M itself, so every VREM must bound its own work. 3,000
  // 3-d elements at M 256 and M 4096, all but 100 removed in insertion order (links pile up on the
  // survivors), each VREM within the budget; every survivor is still found.
  for (const char* m : {"256", "4096"}) {
    const std::string key = std::string("budget:rm") + m;
    for (int i = 0; i < 3000; ++i)
      ASSERT_EQ(run({"INFER.VADD", key, "VALUES", "3", std::to_string(i % 11), std::to_string(i % 13),
                     std::to_string(i % 17 + 1), "e" + std::to_string(i), "M", m}),
                "1");
    for (int i = 0; i < 2900; ++i) ASSERT_EQ(run({"INFER.VREM", key, "e" + std::to_string(i)}), "1") << m << " " << i;
    Reply all = command(c_.get(), {"INFER.VSIM", key, "VALUES", "3", "1", "2", "3", "COUNT", "200", "EF", "1000"});
    ASSERT_TRUE(all);
    ASSERT_EQ(all->type, REDIS_REPLY_ARRAY);
    EXPECT_EQ(all->elements, 100u) << "M " << m;
  }
}

TEST_F(MainThreadBudget, MemberRepliesAtTheirLargest) {
  // VRANGE, VRANDMEMBER and VLINKS write their replies on the main thread: the largest accepted ones
  // (65,536 names; 63 names of 64 KiB, just under the 4 MiB a reply may hold) stay within the budget,
  // and larger asks (LLONG_MIN repetitions, 4 MiB of names) are refused before any work.
  for (int i = 0; i < 63; ++i) {
    std::string name(65536, static_cast<char>('a' + i % 26));
    name.replace(0, 4, std::to_string(1000 + i));
    ASSERT_EQ(run({"INFER.VADD", "budget:names", "VALUES", "3", std::to_string(i % 7), "1", "2", name, "M", "4096"}),
              "1");
  }
  Reply all = command(c_.get(), {"INFER.VRANGE", "budget:names", "-", "+"});
  ASSERT_EQ(all->type, REDIS_REPLY_ARRAY) << show(all.get()).substr(0, 200);
  EXPECT_EQ(all->elements, 63u);
  Reply drawn = command(c_.get(), {"INFER.VRANDMEMBER", "budget:names", "63"});
  EXPECT_EQ(drawn->elements, 63u);
  EXPECT_NE(run({"INFER.VRANDMEMBER", "budget:names", "-65537"}).find("a reply may hold"), std::string::npos);
  EXPECT_NE(run({"INFER.VRANDMEMBER", "budget:names", "-9223372036854775808"}).find("a reply may hold"),
            std::string::npos);
  Reply links = command(c_.get(), {"INFER.VLINKS", "budget:names", all->element[7]->str, "WITHSCORES"});
  EXPECT_EQ(links->type, REDIS_REPLY_ARRAY) << show(links.get()).substr(0, 200);
  EXPECT_EQ(run({"INFER.VADD", "budget:few", "VALUES", "3", "1", "2", "3", "a"}), "1");
  Reply many = command(c_.get(), {"INFER.VRANDMEMBER", "budget:few", "-65536"});
  EXPECT_EQ(many->elements, 65536u);
  // A CAS insert commits on the main thread with the neighbours found on a search thread.
  EXPECT_EQ(run({"INFER.VADD", "budget:names", "VALUES", "3", "1", "1", "1", "cas", "M", "4096", "CAS"}), "1");
  EXPECT_EQ(run({"INFER.VISMEMBER", "budget:names", "cas"}), "1");
}

TEST_F(MainThreadBudget, VaddAcrossTheIdMapSplit) {
  // Element names map to node ids in one hash table up to 16,384 names, then in 256 shards: neither the
  // VADD that splits the table nor a later one may rehash every name on the main thread. 20,000 3-d
  // elements, pipelined (EF 10 keeps the inserts cheap), each VADD within the budget.
  constexpr int kCount = 20000;
  for (int start = 0; start < kCount; start += 1000) {
    for (int i = start; i < start + 1000; ++i)
      send_command(c_.get(), {"INFER.VADD", "budget:ids", "VALUES", "3", std::to_string(i % 101),
                              std::to_string(i % 103 + 1), std::to_string(i % 107), "element:" + std::to_string(i),
                              "EF", "10"});
    for (int i = start; i < start + 1000; ++i) ASSERT_EQ(show(receive(c_.get()).get()), "1") << i;
  }
  EXPECT_EQ(run({"INFER.VCARD", "budget:ids"}), std::to_string(kCount));
  for (int i : {0, 16383, 16384, kCount - 1})
    EXPECT_EQ(run({"INFER.VISMEMBER", "budget:ids", "element:" + std::to_string(i)}), "1") << i;
  EXPECT_EQ(run({"INFER.VREM", "budget:ids", "element:16384"}), "1");
  EXPECT_EQ(run({"INFER.VISMEMBER", "budget:ids", "element:16384"}), "0");
  EXPECT_EQ(run({"DEL", "budget:ids"}), "1");
}

TEST_F(MainThreadBudget, VremOfTheWidestNoquantVectorsAtMFour) {
  // At a small M a removal often leaves a neighbour cut off, and the repair relinks it through a search
  // of the graph; at 65,536-d float32 (256 KiB a vector) those searches too must spend no more than an
  // insert's distance budget. 120 elements at M 4, all but 12 removed in insertion order, each VREM
  // within the budget; every survivor is still found by its own vector.
  constexpr int kCount = 120, kKept = 12;
  for (int e = 0; e < kCount; ++e)
    ASSERT_EQ(run({"INFER.VADD", "budget:rm-wide", "FP32", wide_blob(e), "e" + std::to_string(e), "NOQUANT", "M", "4"}),
              "1")
        << e;
  for (int e = 0; e < kCount - kKept; ++e) ASSERT_EQ(run({"INFER.VREM", "budget:rm-wide", "e" + std::to_string(e)}), "1") << e;
  EXPECT_EQ(run({"INFER.VCARD", "budget:rm-wide"}), std::to_string(kKept));
  for (int e = kCount - kKept; e < kCount; ++e)
    EXPECT_EQ(run({"INFER.VSIM", "budget:rm-wide", "FP32", wide_blob(e), "COUNT", "1", "EF", "4"}),
              "[e" + std::to_string(e) + "]");
  EXPECT_EQ(run({"DEL", "budget:rm-wide"}), "1");
}

TEST_F(MainThreadBudget, LongNamesAndStopStringsAreRefused) {
  // Element names, RAG's DOCKEY and STOP strings are copied and hashed or matched on the main thread.
  const std::string big(kBulk, 'x');
  EXPECT_EQ(run({"INFER.VADD", "budget:n", "VALUES", "3", "1", "2", "3", "a"}), "1");
  const std::string name_error = "element name of " + std::to_string(kBulk) + " bytes is longer than 65536";
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"INFER.VADD", "budget:n", "VALUES", "3", "1", "2", "3", big},
           {"INFER.VSIM", "budget:n", "ELE", big},
           {"INFER.VREM", "budget:n", big},
           {"INFER.VEMB", "budget:n", big},
           {"INFER.VGETATTR", "budget:n", big},
           {"INFER.VSETATTR", "budget:n", big, "{}"},
           {"INFER.EMBED", "stories", "Once", "STORE", "budget:kb", big}}) {
    const std::string r = run(argv);
    EXPECT_NE(r.find(name_error), std::string::npos) << argv[0] << ": " << r.substr(0, 200);
  }
  EXPECT_EQ(run({"INFER.VADD", "budget:n", "VALUES", "3", "1", "2", "3", std::string(65536, 'y')}), "1");
  const std::string rag = run({"INFER.RAG", "stories", "budget:n", "VALUES", "3", "1", "2", "3", "QUESTION", "hi",
                               "DOCKEY", big, "MAXTOKENS", "2"});
  EXPECT_NE(rag.find("DOCKEY of " + std::to_string(kBulk) + " bytes is longer than 65536"), std::string::npos) << rag;
  std::vector<std::string> gen = {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "2"};
  for (int i = 0; i < 16; ++i) gen.insert(gen.end(), {"STOP", big});
  const std::string stop = show(command(c_.get(), gen).get());
  EXPECT_NE(stop.find("STOP string of " + std::to_string(kBulk) + " bytes is longer than 4096"), std::string::npos)
      << stop.substr(0, 200);
}

TEST_F(MainThreadBudget, LogprobsReplyAtTheLargestAccepted) {
  // The reply's log-probabilities are written on the main thread: MAXTOKENS x (LOGPROBS + 1) is bounded.
  constexpr int kMaxLogprobEntries = 8192;  // docs/redis.md, LOGPROBS
  const std::string most = std::to_string(kMaxLogprobEntries / 21);
  const std::string over = std::to_string(kMaxLogprobEntries / 21 + 1);
  for (const char* command : {"GENERATE", "RAG"}) {
    std::vector<std::string> argv = {std::string("INFER.") + command, "stories"};
    if (std::string(command) == "RAG") argv.insert(argv.end(), {"budget:lp", "VALUES", "3", "1", "2", "3", "QUESTION", "Once"});
    else argv.insert(argv.end(), {"PROMPT", "Once"});
    argv.insert(argv.end(), {"LOGPROBS", "20", "MAXTOKENS", over});
    const std::string r = run(argv);
    EXPECT_NE(r.find("more than " + std::to_string(kMaxLogprobEntries)), std::string::npos) << command << ": " << r;
  }
  // The most accepted, kept from ending early by a grammar whose end the model is unlikely to write.
  const std::string r = run({"INFER.GENERATE", "stories", "PROMPT", "Once", "LOGPROBS", "20", "MAXTOKENS", most,
                             "TEMP", "1", "SEED", "7", "GRAMMAR", "root ::= [a-z .,]* \"~\"", "WITHSTATS"});
  EXPECT_EQ(r.find("(error)"), std::string::npos) << r.substr(0, 200);
  EXPECT_NE(r.find("top_logprobs"), std::string::npos) << r.substr(0, 200);
}

TEST_F(MainThreadBudget, GenerateFromManyTokenKeys) {
  // Ten thousand keys: the handler copies token keys on the main thread, and stops at the context.
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", "Once upon a time there was", "STORE", "budget:one"}), "7");
  std::vector<std::string> argv = {"INFER.GENERATE", "stories", "TOKENS"};
  for (int i = 0; i < 10000; ++i) argv.push_back("budget:one");
  argv.insert(argv.end(), {"MAXTOKENS", "2"});
  const std::string r = show(command(c_.get(), argv).get());
  EXPECT_NE(r.find("context"), std::string::npos) << r.substr(0, 200);
}

}  // namespace
}  // namespace infer::test
