// Every rendering in chat-templates/expected.jsonl (54 real templates x 7 conversations, printed by
// Jinja2 3.1 through render_reference.py) must come out byte-identical, or fail with Jinja2's own error message.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "chat/chat_template.h"
#include "support/data_dirs.h"

namespace infer::chat {
namespace {

using nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// render_reference.py fixes strftime_now at 2024-07-26 09:30.
constexpr std::int64_t kOracleNow = 1721986200;

TEST(ChatTemplateOracle, RendersEveryExpectedLineAsJinja2Does) {
  const std::string dir = test::chat_templates_dir();
  INFER_REQUIRE_DIR(dir);
  ordered_json cases = ordered_json::parse(read_file(dir + "/cases.json"));
  std::map<std::string, ordered_json> case_by_name;
  for (const auto& c : cases) case_by_name[c["name"].get<std::string>()] = c;

  std::ifstream expected(dir + "/expected.jsonl");
  std::map<std::string, std::unique_ptr<ChatTemplate>> templates;
  int total = 0, passed = 0;
  std::string line;
  while (std::getline(expected, line)) {
    ordered_json rec = ordered_json::parse(line);
    const std::string name = rec["template"], case_name = rec["case"];
    ++total;
    SCOPED_TRACE(name + " / " + case_name);
    auto& tmpl = templates[name];
    if (!tmpl) {
      try {
        tmpl = std::make_unique<ChatTemplate>(read_file(dir + "/templates/" + name));
      } catch (const TemplateError& e) {
        ADD_FAILURE() << "parse: " << e.what();
        continue;
      }
      tmpl->set_clock([] { return kOracleNow; });
    }
    const ordered_json& c = case_by_name.at(case_name);
    const ordered_json tools = c.contains("tools") ? c["tools"] : ordered_json();
    std::string output, error;
    try {
      output = tmpl->render(c["messages"], tools, c["add_generation_prompt"].get<bool>(), "<BOS>", "<EOS>");
    } catch (const TemplateError& e) {
      error = e.what();
    }
    if (rec.contains("error")) {
      const std::string want = rec["error"];
      EXPECT_EQ(error, want);
      if (error == want) ++passed;
    } else {
      EXPECT_EQ(error, "");
      EXPECT_EQ(output, rec["output"].get<std::string>());
      if (error.empty() && output == rec["output"].get<std::string>()) ++passed;
    }
  }
  EXPECT_EQ(total, 378);
  std::printf("chat template oracle: %d/%d renderings match Jinja2\n", passed, total);
}

}  // namespace
}  // namespace infer::chat
