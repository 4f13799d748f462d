// `infer generate --grammar` and `infer bench --grammar` on stories260K.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "support/data_dirs.h"

namespace infer {
namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

class CliGrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(test::models_dir());
    const char* build = std::getenv("INFER_BUILD_DIR");
    const fs::path build_dir = build ? fs::path(build) : fs::read_symlink("/proc/self/exe").parent_path() / "../..";
    bin_ = build_dir / "src/cli/infer";
    if (!fs::exists(bin_)) GTEST_SKIP() << "infer binary not found at " << bin_;
    tmp_ = fs::temp_directory_path() / ("infer-cli-grammar-" + std::to_string(::getpid()));
    fs::create_directories(tmp_);
    stories_ = test::models_dir() + "/stories260K.gguf";
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = tmp_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  RunResult run(const std::string& args) {
    const auto out = tmp_ / "stdout", err = tmp_ / "stderr";
    const int status = std::system((bin_.string() + " " + args + " >" + out.string() + " 2>" + err.string()).c_str());
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream fo(out), fe(err);
    r.out.assign(std::istreambuf_iterator<char>(fo), {});
    r.err.assign(std::istreambuf_iterator<char>(fe), {});
    return r;
  }
  fs::path bin_, tmp_;
  std::string stories_;
};

TEST_F(CliGrammarTest, GenerateOutputIsInTheGrammarsLanguageAndStopsWhereItEnds) {
  const std::string g = write("list.gbnf", "root ::= \"[\" item (\", \" item){0,3} \"]\"\nitem ::= [a-z]{1,8}\n");
  for (int seed : {1, 2, 3}) {
    auto r = run("generate -m " + stories_ + " -p 'Once upon a time' --temp 1 -s " + std::to_string(seed) +
                 " -n 200 --json --grammar " + g);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["finish_reason"], "stop");
    const std::string text = j["text"];
    EXPECT_TRUE(std::regex_match(text, std::regex(R"(\[[a-z]{1,8}(, [a-z]{1,8}){0,3}\])"))) << text;
  }
}

TEST_F(CliGrammarTest, BadGrammarFailsBeforeTheModelLoadsWithItsPosition) {
  const std::string g = write("bad.gbnf", "root ::= \"a\" b\n");
  auto r = run("generate -m " + stories_ + " -p hi --grammar " + g);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--grammar " + g + ": line 1, column 14: undefined rule 'b'"), std::string::npos) << r.err;
  r = run("bench -m " + stories_ + " -p 0 -n 4 --grammar " + g);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("undefined rule 'b'"), std::string::npos) << r.err;
}

TEST_F(CliGrammarTest, BenchReportsConstrainedAndUnconstrainedDecode) {
  const std::string g = write("arith.gbnf", "root ::= [0-9]{1,3} ([-+*/] [0-9]{1,3}){0,4}\n");
  auto r = run("bench -m " + stories_ + " -p 0 -n 16 -r 2 -t 1 --probe-mib 1 --json --grammar " + g);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["tg_tps"].get<double>(), 0);
  EXPECT_GT(j["tg_grammar_tps"].get<double>(), 0);
  EXPECT_GT(j["tg_grammar_ratio"].get<double>(), 0);
  EXPECT_GE(j["grammar_masks_computed"].get<int>(), 1);
  EXPECT_GE(j["grammar_masks_cached"].get<int>() + j["grammar_masks_computed"].get<int>(), 32);
}

TEST_F(CliGrammarTest, ServeBenchConstrainsEachClientWithItsGrammar) {
  const std::string a = write("a.gbnf", "root ::= [a-z]{1,6}\n");
  const std::string b = write("b.gbnf", "root ::= [0-9]{1,6}\n");
  auto r = run("serve-bench -m " + stories_ + " --concurrency 2 --prompt-tokens 8 --gen-tokens 16 --rounds 1 -t 1 --json"
               " --grammar " + a + " --grammar " + b);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0]["decode_tps"].get<double>(), 0);
  r = run("serve-bench -m " + stories_ + " --concurrency 1 --grammar " + write("bad.gbnf", "root ::= (\n"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--grammar"), std::string::npos) << r.err;
}

TEST_F(CliGrammarTest, ServeBenchTakesJsonSchemasAndNamesABadOne) {
  const std::string s = write("s.json", R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})");
  auto r = run("serve-bench -m " + stories_ + " --concurrency 2 --prompt-tokens 8 --gen-tokens 16 --rounds 1 -t 1 --json"
               " --json-schema " + s + " --grammar " + write("a.gbnf", "root ::= [a-z]{1,6}\n"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u);
  r = run("serve-bench -m " + stories_ + " --concurrency 1 --json-schema " +
          write("bad.json", R"({"type":"object","patternProperties":{}})"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--json-schema"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("patternProperties"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace infer
