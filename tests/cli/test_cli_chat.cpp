// `infer generate --chat` and its chat flags through the built binary, on stories260K copies carrying
// real templates: the prompt ids it prints equal the tokenisation of the Jinja2 oracle's rendering.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/chat_models.h"
#include "support/data_dirs.h"
#include "tokenizer/tokenizer.h"

namespace infer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

class CliChatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(test::models_dir());
    INFER_REQUIRE_DIR(test::chat_templates_root());
    const char* build = std::getenv("INFER_BUILD_DIR");
    const fs::path build_dir = build ? fs::path(build) : fs::read_symlink("/proc/self/exe").parent_path() / "../..";
    bin_ = build_dir / "src/cli/infer";
    if (!fs::exists(bin_)) GTEST_SKIP() << "infer binary not found at " << bin_ << " (set INFER_BUILD_DIR)";
    tmp_ = fs::temp_directory_path() / ("infer-cli-chat-" + std::to_string(::getpid()));
    fs::create_directories(tmp_);
    stories_ = test::models_dir() + "/stories260K.gguf";
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  // Runs `infer ARGS` (shell-quoted); the exit code, stdout and stderr.
  std::tuple<int, std::string, std::string> run(const std::string& args) {
    const std::string cmd = bin_.string() + " " + args + " >" + (tmp_ / "out").string() + " 2>" + (tmp_ / "err").string();
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, test::read_text_file((tmp_ / "out").string()),
            test::read_text_file((tmp_ / "err").string())};
  }
  std::string model_with(const std::string& name, const std::string& chat_template,
                         const std::vector<std::pair<std::string, std::string>>& named = {}) {
    const std::string path = (tmp_ / (name + ".gguf")).string();
    test::write_chat_model(stories_, path, chat_template, named);
    return path;
  }
  std::string file_with(const std::string& name, const std::string& text) {
    const std::string path = (tmp_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // The prompt ids `infer generate ARGS --json -n 1` reports.
  Json prompt_ids(const std::string& args) {
    auto [rc, out, err] = run("generate " + args + " -n 1 --temp 0 --json");
    EXPECT_EQ(rc, 0) << err;
    return rc == 0 ? Json::parse(out)["prompt_ids"] : Json();
  }
  // The ids of `text` as the server tokenises a chat rendering on this vocabulary.
  Json ids_of(const std::string& text) {
    auto file = gguf::File::open(stories_);
    auto tok = tokenizer::Tokenizer::from_gguf(*file);
    const bool has_bos = text.rfind("<s>", 0) == 0;
    return Json(tok->encode(text, tokenizer::EncodeOptions{!has_bos, true}));
  }

  fs::path bin_, tmp_;
  std::string stories_;
};

TEST_F(CliChatTest, ChatFlagsRenderThroughTheModelsTemplate) {
  const std::string qwen3 = test::shared_template("Qwen-Qwen3-0.6B.jinja");
  const std::string hermes = test::shared_template("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja");
  const std::string model = model_with("qwen3", qwen3, {{"tool_use", hermes}});
  const Json user = Json::array({{{"role", "user"}, {"content", "Hi"}}});
  EXPECT_EQ(prompt_ids("-m " + model + " -p Hi --chat"),
            ids_of(test::oracle_render(qwen3, user, nullptr, true, "<s>", "</s>")));

  const Json with_system = Json::array({{{"role", "system"}, {"content", "Be brief."}}, user[0]});
  EXPECT_EQ(prompt_ids("-m " + model + " -p Hi --system 'Be brief.'"),
            ids_of(test::oracle_render(qwen3, with_system, nullptr, true, "<s>", "</s>")));
  EXPECT_EQ(prompt_ids("-m " + model + " -p Hi --chat-args '{\"enable_thinking\": false}'"),
            ids_of(test::oracle_render(qwen3, user, nullptr, true, "<s>", "</s>", {{"enable_thinking", false}})));

  // --messages and --tools: the tool_use variant renders; -p is optional then.
  Json call;
  for (const auto& c : Json::parse(test::read_text_file(test::chat_templates_root() + "/cases.json")))
    if (c["name"] == "tools_call") call = c;
  const std::string messages = file_with("messages.json", call["messages"].dump());
  const std::string tools = file_with("tools.json", call["tools"].dump());
  EXPECT_EQ(prompt_ids("-m " + model + " --messages " + messages + " --tools " + tools),
            ids_of(test::oracle_render(hermes, call["messages"], call["tools"], true, "<s>", "</s>")));
  EXPECT_EQ(prompt_ids("-m " + model + " --messages " + messages + " --tools " + tools + " --chat-template default"),
            ids_of(test::oracle_render(qwen3, call["messages"], call["tools"], true, "<s>", "</s>")));

  // Gemma's template refuses a system turn with its own message; bad JSON says where.
  const std::string gemma = model_with("gemma", test::shared_template("google-gemma-2-2b-it.jinja"));
  auto [rc, out, err] = run("generate -m " + gemma + " -p Hi --system x");
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("raise_exception: System role not supported"), std::string::npos) << err;
  std::tie(rc, out, err) = run("generate -m " + model + " -p Hi --chat-args '{oops'");
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--chat-args is not valid JSON: parse error at line 1, column 2"), std::string::npos) << err;
  std::tie(rc, out, err) = run("generate -m " + model + " --chat");
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("-p/--prompt or --messages is required"), std::string::npos) << err;
  // No template: the built-in formats by name only.
  std::tie(rc, out, err) = run("generate -m " + stories_ + " -p Hi --chat");
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("the model has no chat template"), std::string::npos) << err;
  EXPECT_EQ(prompt_ids("-m " + stories_ + " -p Hi --chat-template chatml"),
            ids_of("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace infer
