// KV-TYPE f16|q8_0|q4_0 on INFER.LOAD and on the MODEL line against a real redis-server: the type and
// a token's bytes in INFER.INFO and INFO, the plan's smaller KV pool (the memory it holds and the
// refusal message), generation from quantised pages, and the options' errors.
#include <gtest/gtest.h>

#include <string>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// stories260K: 5 layers, K and V rows of 32 elements: F16 64 bytes a row, Q8_0 one 34-byte block,
// Q4_0 one 18-byte block; pages of 16 tokens plus a 320-byte pad.
constexpr long long kLayers = 5;
constexpr long long token_bytes(long long row_bytes) { return kLayers * 2 * row_bytes; }
constexpr long long page_bytes(long long row_bytes) { return 16 * token_bytes(row_bytes) + 320; }

class KvTypeTest : public SharedServerTest<KvTypeTest> {
 public:
  static std::vector<std::string> module_args() {
    return {"MODEL", "stories", stories_model_path(), "KV-TYPE", "q8_0", "MODEL-DIR", stories_model_dir(),
            "THREADS", "1"};
  }
  // The value of `field` in INFO infer, or "" when absent.
  std::string info_field(const std::string& field) {
    const std::string info = run({"INFO", "infer"});
    const size_t at = info.find("\n" + field + ":");
    if (at == std::string::npos) return "";
    const size_t start = at + field.size() + 2;
    return info.substr(start, info.find_first_of("\r\n", start) - start);
  }
};

TEST_F(KvTypeTest, TheRefusedPlanShowsTheSmallerPool) {
  // Runs before the suite's other loads. A cap a byte above what the loaded models hold: any further
  // load is refused with its plan.
  const std::string cap = std::to_string(std::stoll(info_field("infer_memory_bytes")) + 1);
  ASSERT_EQ(run({"CONFIG", "SET", "infer.max-memory", cap}), "OK");
  const std::string f16 = run({"INFER.LOAD", "x", "stories.gguf", "MAX-RUNNING", "4", "CONTEXT", "256"});
  const std::string q8 = run({"INFER.LOAD", "x", "stories.gguf", "MAX-RUNNING", "4", "CONTEXT", "256", "KV-TYPE", "q8_0"});
  ASSERT_EQ(run({"CONFIG", "SET", "infer.max-memory", "0"}), "OK");
  // 4 sequences of 256 tokens: 64 pages
  const auto kib = [](long long bytes) { return std::to_string(bytes * 10 / 1024 / 10) + "." + std::to_string(bytes * 10 / 1024 % 10); };
  EXPECT_TRUE(contains(f16, "KV pool " + kib(64 * page_bytes(64)) + " KiB for 4 sequences x 256 tokens, ")) << f16;
  EXPECT_TRUE(contains(q8, "KV pool " + kib(64 * page_bytes(34)) + " KiB for 4 sequences x 256 tokens as q8_0, ")) << q8;
}

TEST_F(KvTypeTest, TheModelLineSetsTheTypeAndInfoReportsIt) {
  const std::string info = run({"INFER.INFO", "stories"});
  EXPECT_TRUE(contains(info, "kv_type, q8_0, kv_bytes_per_token, " + std::to_string(token_bytes(34)))) << info;
  EXPECT_TRUE(contains(info, " tokens q8_0 (")) << info;  // the backend's line
  const std::string all = run({"INFO", "infer"});
  EXPECT_TRUE(contains(all, ",device=cpu,kv_type=q8_0,kv_bytes_per_token=" + std::to_string(token_bytes(34)))) << all;
  // Quantised pages generate stories260K's greedy text.
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once upon a time", "MAXTOKENS", "8", "TEMP", "0"}),
            ", there was a little girl");
}

TEST_F(KvTypeTest, LoadTakesEachTypeAndPlansItsPool) {
  const auto memory = [&] { return std::stoll(info_field("infer_memory_bytes")); };
  const long long before = memory();
  ASSERT_EQ(run({"INFER.LOAD", "f16", "stories.gguf", "KV-TYPE", "F16"}), "OK");
  const long long f16 = memory() - before;
  ASSERT_EQ(run({"INFER.LOAD", "q4", "stories.gguf", "KV-TYPE", "q4_0"}), "OK");
  const long long q4 = memory() - before - f16;
  EXPECT_TRUE(contains(run({"INFER.INFO", "f16"}), "kv_type, f16, kv_bytes_per_token, " + std::to_string(token_bytes(64))));
  EXPECT_TRUE(contains(run({"INFER.INFO", "q4"}), "kv_type, q4_0, kv_bytes_per_token, " + std::to_string(token_bytes(18))));
  // The same options otherwise: the plans differ by the pools' pages alone.
  const std::string pages = info_field("infer_model_f16");
  const std::string total = pages.substr(pages.find("kv_pages_total=") + 15);
  const long long n_pages = std::stoll(total.substr(0, total.find(',')));
  ASSERT_GT(n_pages, 0);
  EXPECT_EQ(f16 - q4, n_pages * (page_bytes(64) - page_bytes(18)));
  const std::string text = run({"INFER.GENERATE", "q4", "PROMPT", "Once upon a time", "MAXTOKENS", "8", "TEMP", "0"});
  EXPECT_FALSE(contains(text, "ERR")) << text;
  EXPECT_EQ(run({"INFER.UNLOAD", "f16"}), "OK");
  EXPECT_EQ(run({"INFER.UNLOAD", "q4"}), "OK");
}

TEST_F(KvTypeTest, BadKvTypesAreRefused) {
  EXPECT_EQ(run({"INFER.LOAD", "x", "stories.gguf", "KV-TYPE", "q4_k"}), "(error) ERR KV-TYPE must be f16, q8_0 or q4_0");
  EXPECT_EQ(run({"INFER.LOAD", "x", "stories.gguf", "KV-TYPE", "q8_0", "DEVICE", "cuda"}),
            "(error) ERR KV-TYPE applies to DEVICE cpu only (cuda keeps its KV cache in f16)");
  EXPECT_TRUE(contains(run({"INFER.LOAD", "x", "stories.gguf", "BOGUS", "1"}), "VRAM-BUDGET, KV-TYPE)"));
  EXPECT_EQ(run({"INFER.MODELS"}), "[stories]");
}

TEST(KvTypeStartup, ABadModelLineTypeStopsTheStart) {
  INFER_REQUIRE_DIR(models_dir());
  try {
    RedisServer server({.module_args = {"MODEL", "s", stories_model_path(), "KV-TYPE", "q5"}, .start_timeout_ms = 5000});
    ADD_FAILURE() << "the server started with KV-TYPE q5";
  } catch (const std::runtime_error& e) {  // the helper puts the server's log in the exception
    EXPECT_TRUE(contains(e.what(), "MODEL s: KV-TYPE must be f16, q8_0 or q4_0")) << e.what();
  }
}

}  // namespace
}  // namespace infer::test
