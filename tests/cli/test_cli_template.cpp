// `infer template`: renders chat templates from a file or a GGUF exactly as Jinja2 did in expected.jsonl.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "support/data_dirs.h"

namespace infer {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

class CliTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* build = std::getenv("INFER_BUILD_DIR");
    const fs::path build_dir = build ? fs::path(build) : fs::read_symlink("/proc/self/exe").parent_path() / "../..";
    bin_ = build_dir / "src/cli/infer";
    if (!fs::exists(bin_)) {
      if (test::in_ci()) FAIL() << "infer binary not found at " << bin_;
      GTEST_SKIP() << "infer binary not found at " << bin_ << " (set INFER_BUILD_DIR)";
    }
    dir_ = test::chat_templates_dir();
    INFER_REQUIRE_DIR(dir_);
    tmp_ = fs::temp_directory_path() / ("infer-template-test-" + std::to_string(::getpid()));
    fs::create_directories(tmp_);
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }

  struct Result {
    int exit_code = -1;
    std::string out, err;
  };

  Result run(const std::string& args) {
    const auto out = tmp_ / "stdout", err = tmp_ / "stderr";
    const int status = std::system((bin_.string() + " template " + args + " >" + out.string() + " 2>" + err.string()).c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }

  // Writes cases.json's entry CASE_NAME with the oracle's tokens to a file; returns its path.
  std::string case_file(const std::string& case_name) {
    for (auto c : ordered_json::parse(slurp(fs::path(dir_) / "cases.json"))) {
      if (c["name"] != case_name) continue;
      c["bos_token"] = "<BOS>";
      c["eos_token"] = "<EOS>";
      const fs::path p = tmp_ / (case_name + ".json");
      std::ofstream(p) << c.dump();
      return p.string();
    }
    ADD_FAILURE() << "no case " << case_name;
    return "";
  }

  ordered_json expected(const std::string& template_name, const std::string& case_name) {
    std::ifstream in(fs::path(dir_) / "expected.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto rec = ordered_json::parse(line);
      if (rec["template"] == template_name && rec["case"] == case_name) return rec;
    }
    ADD_FAILURE() << "no expected line for " << template_name << " / " << case_name;
    return {};
  }

  std::string template_path(const std::string& name) { return (fs::path(dir_) / "templates" / name).string(); }

  fs::path bin_, tmp_;
  std::string dir_;
};

TEST_F(CliTemplateTest, PrintsTheRenderingExactlyWithNoNewlineAdded) {
  const std::pair<const char*, const char*> picks[] = {
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "tools_call"},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "system_user"},  // strftime_now
      {"Qwen-Qwen3-0.6B.jinja", "unicode_and_braces"},
      {"google-gemma-4-31B-it.jinja", "tools_offer"},
  };
  for (const auto& [name, case_name] : picks) {
    SCOPED_TRACE(std::string(name) + " / " + case_name);
    auto r = run("--file " + template_path(name) + " --input " + case_file(case_name) + " --now 2024-07-26T09:30");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected(name, case_name)["output"].get<std::string>());
  }
}

TEST_F(CliTemplateTest, TemplateFailurePrintsJinjasErrorAndExitsNonZero) {
  auto r = run("--file " + template_path("google-gemma-2-2b-it.jinja") + " --input " + case_file("system_user"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("raise_exception: System role not supported"), std::string::npos) << r.err;
}

TEST_F(CliTemplateTest, ReadsTheTemplateFromAGguf) {
  // The qwen2 vocabulary carries Qwen2.5's template (the same text as Qwen-Qwen2.5-7B-Instruct.jinja).
  const std::string gguf = test::vectors_dir() + "/ggml-vocab-qwen2.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << gguf << " missing";
  auto r = run("-m " + gguf + " --input " + case_file("tools_call"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected("Qwen-Qwen2.5-7B-Instruct.jinja", "tools_call")["output"].get<std::string>());
  auto named = run("-m " + gguf + " --name tool_use --input " + case_file("user_only"));
  EXPECT_NE(named.exit_code, 0);
  EXPECT_NE(named.err.find("has no tokenizer.chat_template.tool_use"), std::string::npos) << named.err;
}

TEST_F(CliTemplateTest, ExtraInputKeysBecomeTemplateVariables) {
  const fs::path tmpl = tmp_ / "t.jinja", input = tmp_ / "in.json";
  std::ofstream(tmpl) << "{{ bos_token }}{{ enable_thinking }}|{{ tools is defined }}|{{ messages|length }}";
  std::ofstream(input) << R"({"name": "x", "messages": [{"role": "user", "content": "hi"}], "bos_token": "<s>",
                             "enable_thinking": false})";
  auto r = run("--file " + tmpl.string() + " --input " + input.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s>False|False|1");
}

TEST_F(CliTemplateTest, NeedsExactlyOneTemplateSource) {
  auto r = run("--input " + case_file("user_only"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("exactly one of --file and -m"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace infer
