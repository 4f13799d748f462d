// TOOLCHOICE grammars: what they refuse, and (with the GBNF engine) that they accept exactly one
// well-formed call whose arguments fit the tool's schema, which parse_tool_calls then reads back.
#include "weather_tools.h"
#include "chat/tool_call_grammar.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace infer::chat {
namespace {

using F = ToolCallFormat;
using ordered_json = nlohmann::ordered_json;

TEST(ToolCallGrammar, NamedChoiceOffersOnlyThatTool) {
  std::string gbnf = tool_call_grammar(F::Hermes, weather_tools(), "now");
  EXPECT_NE(gbnf.find("\\\"now\\\""), std::string::npos) << gbnf;
  EXPECT_EQ(gbnf.find("get_weather"), std::string::npos) << gbnf;
  EXPECT_EQ(gbnf.rfind("root ::= ", 0), 0u);
}

TEST(ToolCallGrammar, RequiredOffersEveryTool) {
  std::string gbnf = tool_call_grammar(F::Llama3, weather_tools(), "required");
  EXPECT_NE(gbnf.find("get_weather"), std::string::npos);
  EXPECT_NE(gbnf.find("\\\"now\\\""), std::string::npos);
}

TEST(ToolCallGrammar, BareToolObjectsWork) {
  auto tools = ordered_json::parse(R"([{"name": "f", "parameters": {"properties": {"x": {"type": "number"}}}}])");
  EXPECT_NE(tool_call_grammar(F::Mistral, tools, "f").find("\\\"f\\\""), std::string::npos);
}

TEST(ToolCallGrammar, RefusesAnUnknownName) {
  try {
    tool_call_grammar(F::Hermes, weather_tools(), "get_time");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "TOOLCHOICE get_time: no tool of that name");
  }
}

TEST(ToolCallGrammar, RefusesMalformedToolLists) {
  for (const char* tools : {"[]", "{}", R"([{"function": {}}])", R"([{"name": 3}])", R"([{"name": ""}])",
                            R"([{"name": "f", "parameters": []}])"}) {
    EXPECT_THROW(tool_call_grammar(F::Hermes, ordered_json::parse(tools), "required"), std::invalid_argument)
        << tools;
  }
}

TEST(ToolCallGrammar, RefusesParametersThatAreNotAnObject) {
  auto tools = ordered_json::parse(R"([{"name": "f", "parameters": {"type": "string"}}])");
  EXPECT_THROW(tool_call_grammar(F::Hermes, tools, "f"), std::invalid_argument);
}

TEST(ToolCallGrammar, SchemaErrorsNameTheTool) {
  auto tools = ordered_json::parse(R"([{"name": "f", "parameters": {"type": "object", "patternProperties": {}}}])");
  try {
    tool_call_grammar(F::Hermes, tools, "f");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("tool f: ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("patternProperties"), std::string::npos) << e.what();
  }
}

TEST(ToolCallGrammar, RefusesFormatNone) {
  EXPECT_THROW(tool_call_grammar(F::None, weather_tools(), "required"), std::invalid_argument);
}

TEST(ToolCallGrammar, BareNameFormatsRefuseOddNames) {
  auto tools = ordered_json::parse(R"([{"name": "two words"}])");
  EXPECT_THROW(tool_call_grammar(F::Functionary, tools, "required"), std::invalid_argument);
  EXPECT_NO_THROW(tool_call_grammar(F::Hermes, tools, "required"));  // a JSON string holds any name
}

}  // namespace
}  // namespace infer::chat
