// TOOLCHOICE grammars run through the GBNF engine: each format's grammar accepts a well-formed call
// written the way the format spells it, parse_tool_calls reads that text back as the call, and calls
// with a wrong name or arguments outside the schema are rejected.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "weather_tools.h"
#include "chat/tool_call_grammar.h"
#include "chat/tool_calls.h"
#include "grammar/gbnf.h"

namespace infer::chat {
namespace {

using F = ToolCallFormat;
using ordered_json = nlohmann::ordered_json;

// One call to `name` with `args` (object text) spelled as the grammar of `format` writes it.
std::string call_text(F format, const std::string& name, const std::string& args) {
  switch (format) {
    case F::Hermes: return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>";
    case F::Llama3: return "{\"name\": \"" + name + "\", \"parameters\": " + args + "}";
    case F::Mistral:
    case F::Granite: return "[{\"name\": \"" + name + "\", \"arguments\": " + args + "}]";
    case F::CommandR: return "[{\"tool_name\": \"" + name + "\", \"parameters\": " + args + "}]";
    case F::Functionary: return name + "\n" + args;
    case F::DeepSeek:
      return "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name + "\n```json\n" + args +
             "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    case F::GptOss: return "<|channel|>commentary to=functions." + name + " <|constrain|>json<|message|>" + args + "<|call|>";
    case F::None: break;
  }
  return "";
}

const F kFormats[] = {F::Hermes, F::Llama3, F::Mistral, F::Functionary, F::CommandR, F::Granite, F::DeepSeek, F::GptOss};

TEST(ToolCallGrammarAccepts, WellFormedCallsInEveryFormatParseBack) {
  const std::pair<std::string, std::string> calls[] = {
      {"get_weather", R"({"city":"Paris"})"},
      {"get_weather", R"({"city": "Paris", "unit": "celsius", "days": 3})"},
      {"get_weather", R"({"city":"Zürich \"Nord\"","days":7})"},
      {"now", "{}"},
      {"now", R"({"anything": [1, {"x": null}]})"},
  };
  for (F format : kFormats) {
    auto g = grammar::parse_gbnf(tool_call_grammar(format, weather_tools(), "required"));
    for (const auto& [name, args] : calls) {
      std::string text = call_text(format, name, args);
      EXPECT_TRUE(grammar::grammar_accepts(*g, text)) << tool_call_format_name(format) << ": " << text;
      auto reply = parse_tool_calls(format, text);
      ASSERT_EQ(reply.tool_calls.size(), 1u) << tool_call_format_name(format) << ": " << text;
      EXPECT_EQ(reply.tool_calls[0].name, name);
      EXPECT_EQ(reply.tool_calls[0].arguments, ordered_json::parse(args).dump());
      EXPECT_EQ(reply.content, "");
    }
  }
}

TEST(ToolCallGrammarAccepts, RejectsWrongNamesAndArguments) {
  const std::pair<std::string, std::string> bad[] = {
      {"get_time", R"({"city":"Paris"})"},                    // no such tool
      {"get_weather", "{}"},                                  // required city missing
      {"get_weather", R"({"city":"Paris","unit":"kelvin"})"},  // outside the enum
      {"get_weather", R"({"city":"Paris","days":9})"},         // above the maximum
      {"get_weather", R"({"city":"Paris","wind":true})"},      // additionalProperties false
      {"get_weather", R"({"city":3})"},                        // wrong type
      {"get_weather", R"({"city":"Paris")"},                   // unfinished
  };
  for (F format : kFormats) {
    auto g = grammar::parse_gbnf(tool_call_grammar(format, weather_tools(), "required"));
    for (const auto& [name, args] : bad) {
      std::string text = call_text(format, name, args);
      EXPECT_FALSE(grammar::grammar_accepts(*g, text)) << tool_call_format_name(format) << ": " << text;
    }
  }
}

TEST(ToolCallGrammarAccepts, ExactlyOneCallAndNothingAround) {
  for (F format : kFormats) {
    auto g = grammar::parse_gbnf(tool_call_grammar(format, weather_tools(), "required"));
    std::string one = call_text(format, "now", "{}");
    EXPECT_FALSE(grammar::grammar_accepts(*g, one + one)) << tool_call_format_name(format);
    EXPECT_FALSE(grammar::grammar_accepts(*g, "Sure. " + one)) << tool_call_format_name(format);
    EXPECT_FALSE(grammar::grammar_accepts(*g, one + " done")) << tool_call_format_name(format);
    EXPECT_FALSE(grammar::grammar_accepts(*g, "")) << tool_call_format_name(format);
  }
}

TEST(ToolCallGrammarAccepts, NamedChoiceAcceptsOnlyThatTool) {
  for (F format : kFormats) {
    auto g = grammar::parse_gbnf(tool_call_grammar(format, weather_tools(), "get_weather"));
    EXPECT_TRUE(grammar::grammar_accepts(*g, call_text(format, "get_weather", R"({"city":"Oslo"})")));
    EXPECT_FALSE(grammar::grammar_accepts(*g, call_text(format, "now", "{}"))) << tool_call_format_name(format);
  }
}

}  // namespace
}  // namespace infer::chat
