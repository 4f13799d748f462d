// The built `infer` binary: generate --json on stories260K, bad arguments, synth → inspect/generate.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/cuda_backend.h"
#include "support/data_dirs.h"

namespace infer {
namespace {

namespace fs = std::filesystem;

struct CmdResult {
  int exit_code = -1;
  bool signaled = false;
  std::string out, err;
  double wall_s = 0;  // the whole process's wall time: an upper bound for anything it times
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // ctest sets INFER_BUILD_DIR; run by hand, this binary sits in <build>/tests/cli/.
    const char* build = std::getenv("INFER_BUILD_DIR");
    const fs::path build_dir = build ? fs::path(build) : fs::read_symlink("/proc/self/exe").parent_path() / "../..";
    bin_ = build_dir / "src/cli/infer";
    if (!fs::exists(bin_)) {
      if (test::in_ci()) FAIL() << "infer binary not found at " << bin_;
      GTEST_SKIP() << "infer binary not found at " << bin_ << " (set INFER_BUILD_DIR)";
    }
    tmp_ = fs::temp_directory_path() / ("infer-cli-test-" + std::to_string(::getpid()));
    fs::create_directories(tmp_);
    stories_ = test::models_dir() + "/stories260K.gguf";
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }

  // Runs `infer ARGS` (ARGS already shell-quoted) and captures its output.
  CmdResult run(const std::string& args) {
    const auto out = tmp_ / "stdout", err = tmp_ / "stderr";
    const std::string cmd = bin_.string() + " " + args + " >" + out.string() + " 2>" + err.string();
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    CmdResult r;
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.signaled = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) >= 128);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // `infer serve-bench` on stories260K with ARGS and --json: its rows (none if it failed, which fails
  // the test).
  nlohmann::json serve_bench_rows(const std::string& args) {
    auto r = run("serve-bench -m " + stories_ + " " + args + " --json");
    rows_wall_s_ = r.wall_s;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::array();
  }

  fs::path bin_, tmp_;
  std::string stories_;
  double rows_wall_s_ = 0;  // the last serve_bench_rows run's wall time
};

TEST_F(CliTest, GenerateJsonHasTheFieldsAndReferenceIds) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto r = run("generate -m " + stories_ + " -p 'Once upon a time' -n 8 --temp 0 --json --logits 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], nlohmann::json({1, 403, 407, 261, 378}));
  EXPECT_EQ(j["ids"], nlohmann::json({432, 383, 286, 261, 376, 298, 315, 421}));
  EXPECT_EQ(j["text"], ", there was a little girl");
  EXPECT_EQ(j["finish_reason"], "length");
  // Rates of work timed within the process: 5 prompt tokens, and 7 decode steps (the 8th token needs
  // no step after it).
  EXPECT_GE(j["prefill_tps"].get<double>(), 5 / r.wall_s);
  EXPECT_GE(j["decode_tps"].get<double>(), 7 / r.wall_s);
  ASSERT_EQ(j["prompt_logits"].size(), 5u);
  ASSERT_EQ(j["logits"].size(), 8u);
  EXPECT_EQ(j["prompt_logits"][0][0][0], 403);
  EXPECT_NEAR(j["prompt_logits"][0][0][1].get<double>(), 17.0235, 2e-3);
  EXPECT_EQ(j["logits"][0].size(), 3u);
  EXPECT_GE(j["logits"][0][0][1].get<double>(), j["logits"][0][1][1].get<double>());
}

// --json-schema: the output is JSON the schema accepts and ends by itself; a bad schema fails before
// the model loads, naming the keyword; --grammar excludes it. bench measures decode under it.
TEST_F(CliTest, GenerateAndBenchTakeAJsonSchema) {
  INFER_REQUIRE_DIR(test::models_dir());
  const auto schema = tmp_ / "schema.json";
  std::ofstream(schema) << R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9},)"
                           R"("s":{"enum":["x","y"]}},"required":["n","s"],"additionalProperties":false})";
  auto r = run("generate -m " + stories_ + " -p 'Once' -n 100 --temp 1 -s 4 --json --json-schema " + schema.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["finish_reason"], "stop");
  const auto value = nlohmann::json::parse(j["text"].get<std::string>());
  EXPECT_GE(value["n"].get<int>(), 1);
  EXPECT_LE(value["n"].get<int>(), 9);
  EXPECT_TRUE(value["s"] == "x" || value["s"] == "y") << value;
  std::ofstream(tmp_ / "bad.json") << R"({"type":"string","format":"email"})";
  r = run("generate -m " + stories_ + " -p 'Once' --json-schema " + (tmp_ / "bad.json").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--json-schema " + (tmp_ / "bad.json").string() +
                       ": unsupported format \"email\" (supported: date, time, date-time, uuid) at #/format"),
            std::string::npos)
      << r.err;
  r = run("generate -m " + stories_ + " -p 'Once' --json-schema " + schema.string() + " --grammar " + schema.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;
  r = run("bench -m " + stories_ + " -p 0 -n 16 -r 1 --probe-mib 1 --json --json-schema " + schema.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["tg_grammar_tps"].get<double>(), 0);
}

TEST_F(CliTest, GenerateStreamsTextAndReportsSpeedOnStderr) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto r = run("generate -m " + stories_ + " -p 'Once upon a time' -n 8 --temp 0 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ", there was a little girl\n");
  EXPECT_NE(r.err.find("decode:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

TEST_F(CliTest, GenerateFromTheMappedFileMatchesTheHugePageCopy) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto copied = run("generate -m " + stories_ + " -p 'Once upon a time' -n 8 --temp 0");
  auto mapped = run("generate -m " + stories_ + " -p 'Once upon a time' -n 8 --temp 0 --mmap");
  ASSERT_EQ(mapped.exit_code, 0) << mapped.err;
  EXPECT_EQ(mapped.out, copied.out);
  EXPECT_EQ(mapped.out, ", there was a little girl\n");
}

TEST_F(CliTest, GenerateForceFeedsExactlyThoseIds) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto r = run("generate -m " + stories_ + " -p 'Once upon a time' --force 2,2,300 --json --logits 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ids"], nlohmann::json({2, 2, 300}));
  EXPECT_EQ(j["logits"].size(), 3u);
  EXPECT_EQ(j["logits"][0][0][0], 432);
}

TEST_F(CliTest, GenerateJsonLogprobsPerToken) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto r = run("generate -m " + stories_ + " -p 'Once upon a time' -n 8 --temp 0 --json --logits 3 --logprobs 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["logprobs"].size(), 8u);
  std::string joined;
  for (size_t s = 0; s < 8; ++s) {
    const auto& e = j["logprobs"][s];
    EXPECT_EQ(e["id"], j["ids"][s]);
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(e["top_logprobs"][k]["id"], j["logits"][s][k][0]);  // the same order
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]);  // greedy: the top token
    std::string bytes;
    for (int b : e["bytes"]) bytes += static_cast<char>(b);
    EXPECT_EQ(bytes, e["token"].get<std::string>());
    joined += bytes;
  }
  EXPECT_EQ(joined, j["text"]);
  // Forced ids are scored: id 2 (</s>) is unlikely after "Once upon a time".
  auto f = run("generate -m " + stories_ + " -p 'Once upon a time' --force 432,2 --json --logprobs 0");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  auto jf = nlohmann::json::parse(f.out);
  ASSERT_EQ(jf["logprobs"].size(), 2u);
  EXPECT_EQ(jf["logprobs"][1]["id"], 2);
  EXPECT_EQ(jf["logprobs"][1]["token"], "</s>");
  EXPECT_LT(jf["logprobs"][1]["logprob"].get<double>(), jf["logprobs"][0]["logprob"].get<double>());
  EXPECT_TRUE(jf["logprobs"][0]["top_logprobs"].empty());
  // Without --logprobs there is no such field.
  auto plain = run("generate -m " + stories_ + " -p 'Once upon a time' -n 2 --temp 0 --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("logprobs"));
}

// --help states each option's default, as the README's table of the tool says it does.
TEST_F(CliTest, HelpShowsTheDefaults) {
  const auto r = run("generate --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* shown : {"-n,--n-predict INT=128", "--temp FLOAT=0.8", "--top-k INT=40", "--top-p FLOAT=0.95",
                            "--min-p FLOAT=0.05", "--repeat-penalty FLOAT=1", "--repeat-last-n INT=64", "=2048",
                            "--device TEXT:{cpu,cuda}=cpu"})
    EXPECT_NE(r.out.find(shown), std::string::npos) << shown << " not in\n" << r.out;
  const auto bench = run("bench --help");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.out.find("-p,--n-prompt INT=512"), std::string::npos) << bench.out;
}

TEST_F(CliTest, BadArgumentsFailCleanlyWithAMessage) {
  INFER_REQUIRE_DIR(test::models_dir());
  const std::pair<std::string, std::string> cases[] = {
      {"generate -p hi", "model"},
      {"generate -m " + (tmp_ / "missing.gguf").string() + " -p hi", "missing.gguf"},
      {"generate -m " + stories_ + " -p hi --temp -1", "temperature"},
      {"generate -m " + stories_ + " -p hi --top-p 1.5", "top_p"},
      {"generate -m " + stories_ + " -p hi --min-p 2", "min_p"},
      {"generate -m " + stories_ + " -p hi --repeat-penalty 0", "repeat_penalty"},
      {"generate -m " + stories_ + " -p hi -n -1", "-n"},
      {"generate -m " + stories_ + " -p hi --force 1,x", "--force"},
      {"generate -m " + stories_ + " -p hi --force 1,99999", "outside the vocabulary"},
      {"generate -m " + stories_ + " -p hi --logits 0", "--logits"},
      {"generate -m " + stories_ + " -p hi --json --logprobs 21", "--logprobs: Value 21 not in range 0 to 20"},
      {"generate -m " + stories_ + " -p hi --json --logprobs -1", "--logprobs"},
      {"generate -m " + stories_ + " -p hi --logprobs 2", "--logprobs needs --json"},
      {"generate -m " + stories_ + " -p hi --chat", "chat template"},
      {"generate -m " + stories_ + " -p 'a long prompt that does not fit' -c 3", "context"},
      {"generate -m " + (tmp_ / "junk.gguf").string() + " -p hi", "junk.gguf"},
      {"synth --like gpt-9 -o " + (tmp_ / "x.gguf").string(), "gpt-9"},
      {"synth --type q3_k -o " + (tmp_ / "x.gguf").string(), "q3_k"},
      {"synth --arch qwen2 --like qwen3-0.6b -o " + (tmp_ / "x.gguf").string(), "qwen2"},
      {"bench -m " + stories_ + " -p 0 -n 0", "-p"},
      {"bench -m " + stories_ + " -d 2045 -p 8", "-d/-p/-n exceed the model's context of 2048"},
      // Counts say their range (CLI11's PositiveNumber printed the largest double).
      {"generate -m " + stories_ + " -p hi -t 0", "--threads: Value 0 not in range 1 to 1024"},
      {"bench -m " + stories_ + " -r 0", "--repetitions: Value 0 not in range 1 to 1000"},
      {"synth -t 0 -o " + (tmp_ / "x.gguf").string(), "--threads: Value 0 not in range 1 to 1024"},
      {"no-such-command", "subcommand"},
  };
  { std::ofstream(tmp_ / "junk.gguf") << "not a gguf file at all"; }
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    auto r = run(args);
    EXPECT_FALSE(r.signaled) << r.err;
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  }
}

TEST_F(CliTest, SynthThenInspectAndGenerate) {
  INFER_REQUIRE_DIR(test::models_dir());
  const auto path = (tmp_ / "tiny-qwen3-q4_k_m.gguf").string();
  auto s = run("synth --arch qwen3 --like tiny --type q4_k_m --seed 5 -o " + path);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  auto r = run("inspect --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::map<std::string, std::string> types;
  for (auto& t : j["tensors"]) types[t["name"]] = t["type"];
  EXPECT_EQ(types.size(), 47u);
  EXPECT_EQ(types["output.weight"], "Q6_K");
  EXPECT_EQ(types["token_embd.weight"], "Q4_K");
  EXPECT_EQ(types["blk.2.ffn_down.weight"], "Q6_K");
  EXPECT_EQ(types["blk.1.ffn_down.weight"], "Q4_K");
  EXPECT_EQ(types["blk.3.attn_v.weight"], "Q6_K");
  EXPECT_EQ(types["blk.0.attn_q_norm.weight"], "F32");
  std::map<std::string, std::string> key_types;
  for (auto& m : j["metadata"]) key_types[m["key"]] = m["type"];
  EXPECT_EQ(key_types["general.architecture"], "STRING");
  EXPECT_EQ(key_types["qwen3.block_count"], "UINT32");
  EXPECT_EQ(key_types["qwen3.attention.key_length"], "UINT32");
  EXPECT_EQ(key_types["qwen3.rope.freq_base"], "FLOAT32");
  auto g = run("generate -m " + path + " -p 'Once upon a time' -n 4 --temp 0 --json");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["ids"].size(), 4u);
}

TEST_F(CliTest, BenchJsonReportsSpeedsAndBandwidthShare) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto r = run("bench -m " + stories_ + " -p 32 -n 8 -r 2 -t 1 --probe-mib 32 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // 32 prompt tokens and 8 generated ones per repetition, all within the process's wall time.
  EXPECT_GE(j["pp_tps"].get<double>(), 32 / r.wall_s);
  EXPECT_GE(j["tg_tps"].get<double>(), 8 / r.wall_s);
  // The probe read 32 MiB at least once within it too; the share is the weights' read rate over it.
  EXPECT_GE(j["bandwidth_gbs"].get<double>(), (32 << 20) / 1e9 / r.wall_s);
  EXPECT_DOUBLE_EQ(j["tg_weight_gbs"].get<double>(),
                   j["weight_bytes_per_token"].get<double>() * j["tg_tps"].get<double>() / 1e9);
  EXPECT_DOUBLE_EQ(j["tg_bandwidth_share"].get<double>(),
                   j["tg_weight_gbs"].get<double>() / j["bandwidth_gbs"].get<double>());
  for (const char* k : {"pp_tps_stddev", "tg_tps_stddev"}) EXPECT_GE(j[k].get<double>(), 0) << k;
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["model_bytes"], 292800u * 4);  // stories260K: 292,800 F32 parameters
  EXPECT_NE(r.err.find("tg8 rep 2/2"), std::string::npos) << r.err;
  EXPECT_EQ(j["weights"], "huge-page copy");
  auto mapped = run("bench -m " + stories_ + " -p 8 -n 4 -r 1 -t 1 --probe-mib 8 --json --mmap");
  ASSERT_EQ(mapped.exit_code, 0) << mapped.err;
  EXPECT_EQ(nlohmann::json::parse(mapped.out)["weights"], "mmap");
  EXPECT_EQ(nlohmann::json::parse(mapped.out)["interleaved_matrices"], 0);  // a mapping is never rewritten
  EXPECT_EQ(j["interleaved_matrices"], 0);  // stories260K is F32: no interleaved kernels
  EXPECT_NE(j["cpu"].get<std::string>().find("(family "), std::string::npos) << j["cpu"];
  ASSERT_EQ(j["kernels"].size(), 1u) << j["kernels"];  // one matrix type, row layout
  EXPECT_EQ(j["kernels"][0]["type"], "F32");
  EXPECT_EQ(j["kernels"][0]["interleaved"], false);
  for (const char* k : {"decode", "batch"}) EXPECT_FALSE(j["kernels"][0][k].get<std::string>().empty()) << k;
  EXPECT_EQ(j["depth"], 0);
  // -d: pp and tg start after a context prefilled first, as llama-bench's -d; the table names it so.
  auto deep = run("bench -m " + stories_ + " -p 8 -n 4 -d 1000 -r 1 -t 1 --probe-mib 8 --json");
  ASSERT_EQ(deep.exit_code, 0) << deep.err;
  EXPECT_EQ(nlohmann::json::parse(deep.out)["depth"], 1000);
  EXPECT_NE(deep.err.find("prefilling a context of 1000 tokens"), std::string::npos) << deep.err;
  auto table = run("bench -m " + stories_ + " -p 8 -n 4 -d 16 -r 1 -t 1 --probe-mib 8");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("| pp8 @ d16 |"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("| tg4 @ d16 |"), std::string::npos) << table.out;
}

TEST_F(CliTest, ServeBenchJsonHasOneRowPerConcurrency) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto rows = serve_bench_rows("--concurrency 1,2,4 --prompt-tokens 16 --gen-tokens 8 -t 1");
  ASSERT_EQ(rows.size(), 3u);
  const int levels[] = {1, 2, 4};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["concurrency"], levels[i]);
    // Random prompts may stop early at an end token, so the decode rate has no lower bound here; every
    // first token comes within the run.
    EXPECT_GT(rows[i]["decode_tps"].get<double>(), 0);
    EXPECT_GT(rows[i]["request_decode_tps"].get<double>(), 0);
    EXPECT_GT(rows[i]["ttft_p50_ms"].get<double>(), 0);
    EXPECT_LE(rows[i]["ttft_p99_ms"].get<double>(), 1000 * rows_wall_s_);
    EXPECT_LE(rows[i]["ttft_p50_ms"].get<double>(), rows[i]["ttft_p99_ms"].get<double>());
    EXPECT_FALSE(rows[i].contains("ttft_cold_ms")) << "prefix fields only with --shared-prefix";
    // One run per level: its decode tok/s is the level's, and its ratio is to the first level's.
    ASSERT_EQ(rows[i]["decode_tps_runs"].size(), 1u);
    EXPECT_DOUBLE_EQ(rows[i]["decode_tps_runs"][0].get<double>(), rows[i]["decode_tps"].get<double>());
    EXPECT_NEAR(rows[i]["ratio_to_first"].get<double>(),
                rows[i]["decode_tps"].get<double>() / rows[0]["decode_tps"].get<double>(), 1e-12);
    // The memory plan. stories260K: 292,800 F32 weights; 5 layers × 4 KV heads × head_dim 8 × K and V
    // × 2 bytes = 640 bytes per token; each slot holds a full context (16 + 8 + 1 tokens) in 16-token pages.
    EXPECT_EQ(rows[i]["model_bytes"], 292800u * 4);
    EXPECT_EQ(rows[i]["kv_bytes_per_token"], 640u);
    EXPECT_EQ(rows[i]["max_seq_tokens"], 25);
    EXPECT_EQ(rows[i]["kv_page_tokens"], 16);
    EXPECT_EQ(rows[i]["kv_pool_tokens"], levels[i] * 32) << "two pages per slot";
    const auto pool = rows[i]["kv_pool_bytes"].get<uint64_t>(), tokens = rows[i]["kv_pool_tokens"].get<uint64_t>();
    EXPECT_GE(pool, tokens * 640);
    EXPECT_LE(pool, tokens * 640 * 21 / 20) << "page padding stays small";
  }
}

TEST_F(CliTest, ServeBenchTextReportsTheMemoryPlan) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto r = run("serve-bench -m " + stories_ + " --concurrency 1,2 --prompt-tokens 16 --gen-tokens 8 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("memory: weights 1.1 MiB, KV 0.6 KiB per token (f16, pages of 16 tokens), per-sequence cap 25 tokens"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kv pool MiB"), std::string::npos) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(lines, line)) {
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0]))) rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), 2u) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::istringstream cols(rows[i]);
    std::vector<std::string> v;
    for (std::string c; cols >> c;) v.push_back(c);
    ASSERT_EQ(v.size(), 8u) << rows[i];
    EXPECT_EQ(v[0], std::to_string(i + 1));
    if (i == 0) {
      EXPECT_EQ(v[2], "1.00") << "the first level against itself";
    }
    EXPECT_EQ(v[7], std::to_string(32 * (i + 1))) << "kv tokens: two 16-token pages per slot";
  }
}

TEST_F(CliTest, ServeBenchRepeatsAlternateLevelsAndReportMedians) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto r = run("serve-bench -m " + stories_ + " --concurrency 1,2 --prompt-tokens 16 --gen-tokens 8 -t 1 --repeats 3 --profile --probe-mib 16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  std::vector<double> runs[2];
  for (size_t i = 0; i < 2; ++i) {
    for (const auto& v : rows[i]["decode_tps_runs"]) runs[i].push_back(v.get<double>());
    ASSERT_EQ(runs[i].size(), 3u) << r.out;
    std::vector<double> sorted = runs[i];
    std::sort(sorted.begin(), sorted.end());
    EXPECT_DOUBLE_EQ(rows[i]["decode_tps"].get<double>(), sorted[1]) << "the median of three";
  }
  // The ratio pairs each repeat's runs: the median of the three ratios, not a ratio of medians.
  std::vector<double> ratios;
  for (size_t k = 0; k < 3; ++k) ratios.push_back(runs[1][k] / runs[0][k]);
  std::sort(ratios.begin(), ratios.end());
  EXPECT_DOUBLE_EQ(rows[0]["ratio_to_first"].get<double>(), 1.0);
  EXPECT_NEAR(rows[1]["ratio_to_first"].get<double>(), ratios[1], 1e-12);
  // The profile sums the repeats: three times the one-row steps of a single run at concurrency 1.
  EXPECT_EQ(rows[0]["decode_profile"]["steps"].get<int>(), 3 * 14) << r.out;
  // Progress on stderr, one line per run in the order they ran: levels alternate within each repeat.
  std::vector<std::string> order;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) {
    const auto at = line.find("concurrency ");
    if (line.rfind("serve-bench: run ", 0) == 0 && at != std::string::npos) order.push_back(line.substr(at, 14));
  }
  const std::vector<std::string> expected = {"concurrency 1 ", "concurrency 2 ", "concurrency 1 ",
                                             "concurrency 2 ", "concurrency 1 ", "concurrency 2 "};
  EXPECT_EQ(order, expected) << r.err;

  auto text = run("serve-bench -m " + stories_ + " --concurrency 1 --prompt-tokens 16 --gen-tokens 8 -t 1 --repeats 2");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("decode min-max"), std::string::npos) << text.out;
}

TEST_F(CliTest, ServeBenchProfileSplitsTheDecodeStep) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto rows = serve_bench_rows("--concurrency 1,2 --prompt-tokens 16 --gen-tokens 8 -t 1 --profile --probe-mib 16");
  ASSERT_EQ(rows.size(), 2u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& p = rows[i]["decode_profile"];
    ASSERT_TRUE(p.is_object()) << p;
    // 2 rounds per client of 8 tokens: 7 decode rows per request (the first token comes with the
    // prefill). At concurrency 1 every decode step is decode-only: 14 steps of one row. At 2, the 28
    // decode rows share steps, and each of the 4 prefill steps may carry one of the other client's decode
    // rows, which then is not profiled: 24 to 28 rows in steps of one or two.
    const int steps = p["steps"].get<int>();
    const double profiled_rows = steps * p["rows_per_step"].get<double>();
    // The attention's reads: every layer's key and value rows of the keys each decode row attends to.
    const double token_bytes = rows[i]["kv_bytes_per_token"].get<double>();
    if (i == 0) {
      EXPECT_EQ(steps, 14) << p;
      EXPECT_DOUBLE_EQ(profiled_rows, 14) << p;
      // Each request's decode rows are positions 16..22, attending to 17..23 keys: 140 keys, twice,
      // over 14 steps.
      EXPECT_NEAR(p["attention_mb_per_step"].get<double>(), 20 * token_bytes / 1e6, 1e-9 * token_bytes) << p;
    } else {
      EXPECT_GE(profiled_rows, 24 - 1e-6) << p;
      EXPECT_LE(profiled_rows, 28 + 1e-6) << p;
    }
    EXPECT_GE(p["rows_per_step"].get<double>(), 1.0);
    EXPECT_LE(p["rows_per_step"].get<double>(), double(i + 1));
    double sum = 0;
    for (const char* key : {"qkv_ms", "attention_ms", "output_ms", "ffn_up_ms", "ffn_down_ms", "classifier_ms",
                            "other_ms", "after_pass_ms"}) {
      ASSERT_TRUE(p.contains(key)) << key;
      EXPECT_GE(p[key].get<double>(), 0.0) << key;
      sum += p[key].get<double>();
    }
    EXPECT_GT(p["qkv_ms"].get<double>(), 0.0);
    EXPECT_GT(p["classifier_ms"].get<double>(), 0.0);
    EXPECT_GE(p["attention_mb_per_step"].get<double>(), 17 * token_bytes / 1e6) << p;
    EXPECT_NEAR(p["attention_gbs"].get<double>(),
                p["attention_mb_per_step"].get<double>() / p["attention_ms"].get<double>(),
                1e-9 * p["attention_gbs"].get<double>())
        << p;
    ASSERT_GT(rows[i]["bandwidth_probe_gbs"].get<double>(), 0.0);
    EXPECT_NEAR(p["attention_share_of_probe"].get<double>(),
                p["attention_gbs"].get<double>() / rows[i]["bandwidth_probe_gbs"].get<double>(), 1e-12)
        << p;
    // The step's wall time holds its phases; the decode rate is these steps' rows over that time.
    EXPECT_GE(p["step_ms"].get<double>(), sum) << p;
    EXPECT_NEAR(rows[i]["decode_tps"].get<double>(), 1e3 * p["rows_per_step"].get<double>() / p["step_ms"].get<double>(),
                1e-9 * rows[i]["decode_tps"].get<double>())
        << p;
  }

  auto text = run("serve-bench -m " + stories_ + " --concurrency 2 --prompt-tokens 16 --gen-tokens 8 -t 1 --profile --probe-mib 16");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("decode step profile"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("attention's reads"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("probe GB/s"), std::string::npos) << text.out;
  // No probe: the reads without their share.
  auto unprobed = serve_bench_rows("--concurrency 1 --prompt-tokens 16 --gen-tokens 8 -t 1 --profile --probe-mib 0");
  ASSERT_EQ(unprobed.size(), 1u);
  EXPECT_TRUE(unprobed[0]["decode_profile"].contains("attention_gbs")) << unprobed[0];
  EXPECT_FALSE(unprobed[0]["decode_profile"].contains("attention_share_of_probe")) << unprobed[0];
  EXPECT_FALSE(unprobed[0].contains("bandwidth_probe_gbs")) << unprobed[0];
  auto plain = serve_bench_rows("--concurrency 2 --prompt-tokens 16 --gen-tokens 8 -t 1");
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_FALSE(plain[0].contains("decode_profile")) << "--profile only when asked";
}

TEST_F(CliTest, ServeBenchSharedPrefixReportsColdWarmAndHitRate) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto rows = serve_bench_rows("--concurrency 2 --prompt-tokens 40 --shared-prefix 32 --gen-tokens 4 -t 1");
  ASSERT_EQ(rows.size(), 1u);
  for (const char* k : {"ttft_cold_ms", "ttft_warm_ms"}) {
    EXPECT_GT(rows[0][k].get<double>(), 0) << k;
    EXPECT_LE(rows[0][k].get<double>(), 1000 * rows_wall_s_) << k;
  }
  // 32 of 40 tokens shared, reused in whole 16-token pages: 32 cached tokens per warm prompt.
  EXPECT_GT(rows[0]["cache_hit_rate"].get<double>(), 0.5);
  EXPECT_LE(rows[0]["cache_hit_rate"].get<double>(), 1.0);
}

TEST_F(CliTest, ServeBenchRunsTheSmallestRequests) {
  INFER_REQUIRE_DIR(test::models_dir());
  // A context of 2 + 1 + 1 tokens: the warm-up request must fit it too.
  auto rows = serve_bench_rows("--concurrency 1,2 --prompt-tokens 2 --gen-tokens 1 -t 1");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    EXPECT_EQ(row["max_seq_tokens"], 4);
    EXPECT_GT(row["ttft_p50_ms"].get<double>(), 0);
    EXPECT_LE(row["ttft_p50_ms"].get<double>(), 1000 * rows_wall_s_);
    EXPECT_EQ(row["decode_tps"].get<double>(), 0) << "one token each: it comes with the prefill, none is decoded";
  }
}

TEST_F(CliTest, ServeBenchBadArgumentsFailCleanly) {
  INFER_REQUIRE_DIR(test::models_dir());
  const std::pair<std::string, std::string> cases[] = {
      {"--concurrency 0", "'0' is not a count"},
      {"--concurrency abc", "'abc' is not a count"},
      {"--concurrency 1,,2", "is not a count"},
      {"--prompt-tokens 0", "must be >= 1"},
      {"--repeats 0", "--repeats must be >= 1"},
      {"--prompt-tokens 50 --shared-prefix 50", "--shared-prefix must be in [0, --prompt-tokens)"},
  };
  for (const auto& [args, message] : cases) {
    auto r = run("serve-bench -m " + stories_ + " " + args + " --json");
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << " → " << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
}

// `infer embed` on the tiny bert reference model: prompt ids and the mean (the model's pooling) as
// llama.cpp computed them, one vector per token unpooled, unit length with --normalize.
TEST_F(CliTest, EmbedJsonMatchesTheReferenceMeanAndPoolsAsAsked) {
  INFER_REQUIRE_DIR(test::reference_dir());
  const std::string bert = test::reference_dir() + "/models/tiny-bert-f32.gguf";
  std::ifstream ref_file(test::reference_dir() + "/out/tiny-bert-f32.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(ref_file, line));
  const auto ref = nlohmann::json::parse(line);
  ASSERT_EQ(ref["prompt"], "Once upon a time");

  auto r = run("embed -m " + bert + " -p 'Once upon a time' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{\"prompt_ids\":", 0), 0u) << r.out.substr(0, 40);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], ref["prompt_ids"]);
  ASSERT_EQ(j["embedding"].size(), ref["embd_mean"].size());
  for (size_t i = 0; i < ref["embd_mean"].size(); ++i)
    EXPECT_NEAR(j["embedding"][i].get<double>(), ref["embd_mean"][i].get<double>(), 0.01) << i;

  r = run("embed -m " + bert + " -p 'Once upon a time' --pooling none --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["embeddings"].size(), ref["prompt_ids"].size());
  EXPECT_NEAR(j["embeddings"][0][0].get<double>(), ref["embd_cls"][0].get<double>(), 0.01);

  r = run("embed -m " + bert + " -p 'Once upon a time' --pooling cls --normalize --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double norm = 0;
  j = nlohmann::json::parse(r.out);
  for (const auto& x : j["embedding"]) norm += x.get<double>() * x.get<double>();
  EXPECT_NEAR(norm, 1.0, 1e-5);

  r = run("embed -m " + bert + " -p 'x' --pooling median");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--pooling: 'median' is not one of none, mean, cls, last"), std::string::npos) << r.err;
}

TEST_F(CliTest, GenerateOnAnEmbeddingModelIsAClearError) {
  INFER_REQUIRE_DIR(test::reference_dir());
  auto r = run("generate -m " + test::reference_dir() + "/models/tiny-bert-f32.gguf -p 'Once' -n 4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.signaled);
  EXPECT_NE(r.err.find("model 'bert' is an embedding model: it cannot generate text"), std::string::npos) << r.err;
}

// `infer bench --embed N` on a bert model: sequences per second, and tokens per second = N times that.
TEST_F(CliTest, BenchEmbedReportsSequencesAndTokensPerSecond) {
  INFER_REQUIRE_DIR(test::reference_dir());
  auto r = run("bench -m " + test::reference_dir() + "/models/tiny-bert-f32.gguf --embed 32 --embed-seqs 4 -r 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["embed_tokens"], 32);
  EXPECT_EQ(j["embed_sequences"], 4);
  const double seqs = j["embed_seqs_per_s"].get<double>();
  EXPECT_GT(seqs, 0.1);  // 4 sequences of 32 tokens on a 4-layer, 64-wide model take well under 40 s
  EXPECT_DOUBLE_EQ(j["embed_tokens_per_s"].get<double>(), seqs * 32);
}

// --device: cpu runs as before and says so; cuda, where this build or machine has no GPU, exits 1 with
// one line giving the device layer's reason, before the model is read.
TEST_F(CliTest, DeviceCpuRunsAndCudaWithoutAGpuIsOneClearLine) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto cpu = run("generate -m " + stories_ + " -p 'Once upon a time' -n 8 --temp 0 --device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(cpu.out, ", there was a little girl\n");
  auto bench = run("bench -m " + stories_ + " -p 8 -n 4 -r 1 -t 1 --probe-mib 8 --json --device cpu");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const auto j = nlohmann::json::parse(bench.out);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["backend"].get<std::string>().rfind("cpu, 1 threads, KV ", 0), 0u) << j["backend"];
  EXPECT_NE(bench.err.find("bench: backend: cpu, 1 threads"), std::string::npos) << bench.err;
  auto rows = serve_bench_rows("--concurrency 1 --prompt-tokens 8 --gen-tokens 4 -t 1 --device cpu");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["device"], "cpu");

  std::string why;
  if (cuda::available(&why)) GTEST_SKIP() << "this machine has a GPU: cuda is not refused here";
  { std::ofstream(tmp_ / "junk.gguf") << "not a gguf file at all"; }  // refused before it is read
  for (const std::string& cmd : {"generate -m " + stories_ + " -p 'Once upon a time' -n 8",
                                "bench -m " + stories_ + " -p 8 -n 4 -r 1 --probe-mib 8 --json",
                                "serve-bench -m " + stories_ + " --concurrency 1 --json",
                                "generate -m " + (tmp_ / "junk.gguf").string() + " -p x"}) {
    SCOPED_TRACE(cmd);
    auto r = run(cmd + " --device cuda --gpu-layers auto --vram-budget 1000000");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_FALSE(r.signaled);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "infer: device cuda is not available: " + why + "\n");
  }
  auto bad = run("generate -m " + stories_ + " -p x --device tpu");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--device: tpu not in {cpu,cuda}"), std::string::npos) << bad.err;
  bad = run("generate -m " + stories_ + " -p x --device cpu --gpu-layers some");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--gpu-layers: expected a layer count >= 0 or 'auto', got 'some'"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace infer
