// Random mutations of the 54 real templates (with the oracle's conversations) must parse and render or fail
// with TemplateError: never crash, hang or throw anything else. Deterministic seed; run under the asan preset.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/chat_template.h"
#include "support/data_dirs.h"

namespace infer::chat {
namespace {

using nlohmann::ordered_json;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* const kFragments[] = {
    "{%", "%}", "{{", "}}", "{#", "#}", "-", "+", "(", ")", "[", "]", "{", "}", "'", "\"", "|", ".", ",", "~",
    "*", "**", "//", " is ", " not ", " in ", "loop", "ns", "none", "endfor", "endif", "endmacro", "\n", "  ",
    "{% for x in messages %}", "{% endfor %}", "{% if x %}", "{% else %}", "{% endif %}", "{% break %}",
    "{% macro m(a) %}{{ m(a) }}{% endmacro %}{{ m(1) }}", "{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns }}",
    "{{ messages|tojson(indent=2) }}", "{{ range(99999)|join }}", "[1, 2][::-1]", "'\\u00e9'[0:]",
    "{% raw %}", "{% endraw %}", "|map('upper')", "|selectattr('role')", ".append(1)", "{{ 'a' * 999999999 }}",
};

std::string mutate(std::string s, std::mt19937& rng) {
  auto pick = [&](std::size_t n) { return n ? std::uniform_int_distribution<std::size_t>(0, n - 1)(rng) : 0; };
  int count = 1 + int(pick(2));
  for (int m = 0; m < count; ++m) {
    std::size_t at = pick(s.size() + 1);
    switch (pick(5)) {
      case 0: s.erase(at, pick(40)); break;
      case 1: s.insert(at, kFragments[pick(std::size(kFragments))]); break;
      case 2: if (at < s.size()) s[at] = char(pick(256)); break;
      case 3: {
        std::size_t from = pick(s.size() + 1), len = pick(200);
        s.insert(at, s.substr(from, len));
        break;
      }
      default: {
        std::size_t len = pick(60);
        std::string cut = s.substr(at, len);
        s.erase(at, len);
        s.insert(pick(s.size() + 1), cut);
      }
    }
  }
  return s;
}

TEST(ChatTemplateFuzz, MutatedRealTemplatesNeverCrash) {
  const std::string dir = test::chat_templates_dir();
  INFER_REQUIRE_DIR(dir);
  const ordered_json cases = ordered_json::parse(read_file(std::filesystem::path(dir) / "cases.json"));
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(dir) / "templates"))
    if (entry.path().extension() == ".jinja") paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  ASSERT_EQ(paths.size(), 54u);

  std::mt19937 rng(20240726);
  TemplateLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 4 << 20;
  int parsed = 0, rendered = 0, total = 0;
  for (const auto& path : paths) {
    const std::string source = read_file(path);
    for (int variant = 0; variant < 100; ++variant) {
      const std::string mutated = mutate(source, rng);
      const ordered_json& c = cases[std::size_t(variant) % cases.size()];
      ++total;
      try {
        ChatTemplate tmpl(mutated);
        ++parsed;
        tmpl.set_limits(limits);
        tmpl.render(c["messages"], c.contains("tools") ? c["tools"] : ordered_json(), true, "<s>", "</s>");
        ++rendered;
      } catch (const TemplateError&) {
        // the expected way for a broken template to fail
      } catch (const std::exception& e) {
        ADD_FAILURE() << path.filename() << " variant " << variant << " threw a non-TemplateError: " << e.what();
      }
    }
  }
  std::printf("fuzz: %d mutated templates, %d parsed, %d rendered\n", total, parsed, rendered);
}

}  // namespace
}  // namespace infer::chat
