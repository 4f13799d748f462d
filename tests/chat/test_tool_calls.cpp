// Tool-call parsing for every format, on outputs shaped as the shipped templates write calls, plus text
// around calls, several calls, and malformed or unfinished calls (which stay content).
#include "chat/tool_calls.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/data_dirs.h"

namespace infer::chat {
namespace {

using F = ToolCallFormat;

// The shipped templates sit beside the models in the shared data.
std::filesystem::path templates_dir() {
  return std::filesystem::path(test::models_dir()).parent_path() / "chat-templates" / "templates";
}

std::string template_source(const std::string& name) {
  std::ifstream in(templates_dir() / (name + ".jinja"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void expect_call(const ToolCall& call, const std::string& name, const std::string& arguments) {
  EXPECT_EQ(call.name, name);
  EXPECT_EQ(call.arguments, arguments);
}

bool alphanumeric(const std::string& s) {
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  return true;
}

TEST(ToolCallFormatDetect, ShippedTemplatesMapToTheirFormats) {
  const std::pair<const char*, F> cases[] = {
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", F::Hermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", F::Hermes},
      {"Qwen-Qwen2.5-7B-Instruct", F::Hermes},
      {"Qwen-Qwen3-0.6B", F::Hermes},
      {"ibm-granite-granite-4.1", F::Hermes},
      {"meta-llama-Llama-3.1-8B-Instruct", F::Llama3},
      {"meta-llama-Llama-3.2-3B-Instruct", F::Llama3},
      {"meta-llama-Llama-3.3-70B-Instruct", F::Llama3},
      {"mistralai-Mistral-Nemo-Instruct-2407", F::Mistral},
      {"Mistral-Small-3.2-24B-Instruct-2506", F::Mistral},
      {"mistralai-Ministral-3-14B-Reasoning-2512", F::Mistral},
      {"meetkai-functionary-medium-v3.2", F::Functionary},
      {"CohereForAI-c4ai-command-r-plus-tool_use", F::CommandR},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", F::CommandR},
      {"ibm-granite-granite-3.3-2B-Instruct", F::Granite},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", F::DeepSeek},
      {"llama-cpp-deepseek-r1", F::DeepSeek},
      {"deepseek-ai-DeepSeek-V3.2", F::DeepSeek},
      {"deepseek-ai-DeepSeek-V4", F::DeepSeek},
      {"unsloth-Apriel-1.5", F::Hermes},
      {"Apriel-1.6-15b-Thinker-fixed", F::Hermes},
      {"MiniMax-M1", F::Hermes},
      {"google-gemma-2-2b-it", F::None},
      {"microsoft-Phi-3.5-mini-instruct", F::None},
  };
  INFER_REQUIRE_DIR(templates_dir());
  for (const auto& [name, format] : cases) {
    std::string source = template_source(name);
    ASSERT_FALSE(source.empty()) << name;
    EXPECT_EQ(detect_tool_call_format(source), format)
        << name << " detected as " << tool_call_format_name(detect_tool_call_format(source));
  }
}

TEST(ToolCallFormatDetect, HarmonyMarkersAreGptOss) {
  EXPECT_EQ(detect_tool_call_format("{{- '<|start|>assistant to=functions.' + name + '<|channel|>' }}"), F::GptOss);
}

TEST(ToolCallFormatName, NamesEveryFormat) {
  EXPECT_EQ(tool_call_format_name(F::Hermes), "hermes");
  EXPECT_EQ(tool_call_format_name(F::CommandR), "command-r");
  EXPECT_EQ(tool_call_format_name(F::GptOss), "gpt-oss");
  EXPECT_EQ(tool_call_format_name(F::None), "none");
}

// Every shipped template's own rendering of an assistant turn with a call (cases.json "tools_call":
// get_weather, city Paris, unit celsius), from the Jinja2 oracle's output between the user's question and
// the tool's result, parses back into that call in the format detected from the template.
TEST(ParseTemplateRenderings, EveryToolTemplateReadsBackItsOwnCall) {
  const std::filesystem::path expected = templates_dir().parent_path() / "expected.jsonl";
  INFER_REQUIRE_DIR(templates_dir());
  // Templates whose rendering of this case holds no call in a format they teach (the turn is dropped,
  // or written in a syntax outside this module's formats).
  const std::set<std::string> no_call = {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
                                         "ibm-granite-granite-3.3-2B-Instruct.jinja", "MiniMax-M3.jinja"};
  std::ifstream in(expected);
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    auto entry = nlohmann::json::parse(line);
    if (entry["case"] != "tools_call" || !entry.contains("output")) continue;
    const std::string name = entry["template"];
    const F format = detect_tool_call_format(template_source(name.substr(0, name.size() - 6)));
    if (format == F::None) continue;
    const std::string output = entry["output"];
    size_t from = output.find("Weather in Paris?");
    size_t to = output.find("18", from);
    ASSERT_NE(from, std::string::npos) << name;
    std::string_view turn = std::string_view(output).substr(from + 17, to - from - 17);
    if (format == F::Llama3) {  // a Llama reply is nothing but the call: cut the turn out of its headers
      turn = turn.substr(turn.find("assistant<|end_header_id|>\n\n") + 28);
      turn = turn.substr(0, turn.find("<|eot_id|>"));
    }
    auto reply = parse_tool_calls(format, turn);
    if (no_call.count(name)) {
      EXPECT_TRUE(reply.tool_calls.empty()) << name;
      continue;
    }
    ++checked;
    ASSERT_EQ(reply.tool_calls.size(), 1u) << name << " (" << tool_call_format_name(format) << ")";
    expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris","unit":"celsius"})");
  }
  EXPECT_GE(checked, 25);
}

TEST(ParseHermes, XmlFunctionBodies) {
  auto reply = parse_tool_calls(F::Hermes,
                                "<tool_call>\n<function=search>\n<parameter=query>\nred fish\n</parameter>\n"
                                "<parameter=k>\n3\n</parameter>\n<parameter=filters>\n{\"lang\": [\"en\"]}\n"
                                "</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "search", R"({"query":"red fish","k":3,"filters":{"lang":["en"]}})");
  auto glm = parse_tool_calls(F::Hermes, "<tool_call>now</tool_call><tool_call>f<arg_key>a</arg_key>"
                                         "<arg_value>true</arg_value></tool_call>");
  ASSERT_EQ(glm.tool_calls.size(), 2u);
  expect_call(glm.tool_calls[0], "now", "{}");
  expect_call(glm.tool_calls[1], "f", R"({"a":true})");
  std::string unfinished = "<tool_call>\n<function=search>\n<parameter=query>\nred";
  EXPECT_EQ(parse_tool_calls(F::Hermes, unfinished).content, unfinished);
  std::string prose = "<tool_call>is how I would start a call</tool_call>";
  EXPECT_TRUE(parse_tool_calls(F::Hermes, prose).tool_calls.empty());
}

TEST(ParseHermes, ToolCallsBlocks) {
  auto apriel = parse_tool_calls(F::Hermes, "Checking.\n<tool_calls>[{\"name\": \"a\", \"arguments\": {}, \"id\": "
                                            "\"call_1\"}, {\"name\": \"b\", \"arguments\": {\"x\": 1}}]</tool_calls>");
  EXPECT_EQ(apriel.content, "Checking.");
  ASSERT_EQ(apriel.tool_calls.size(), 2u);
  EXPECT_EQ(apriel.tool_calls[0].id, "call_1");
  expect_call(apriel.tool_calls[1], "b", R"({"x":1})");
  auto minimax = parse_tool_calls(F::Hermes, "<tool_calls>\n{\"name\": \"a\", \"arguments\": {}}\n"
                                             "{\"name\": \"b\", \"arguments\": {}}\n</tool_calls>");
  ASSERT_EQ(minimax.tool_calls.size(), 2u);
  std::string unclosed = "<tool_calls>[{\"name\": \"a\", \"arguments\": {}}]";
  EXPECT_EQ(parse_tool_calls(F::Hermes, unclosed).content, unclosed);
}

// --- Hermes / Qwen ---------------------------------------------------------------------------------

TEST(ParseHermes, QwenShapedCallWithTextBefore) {
  auto reply = parse_tool_calls(F::Hermes,
                                "Let me look that up.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                "{\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>");
  EXPECT_EQ(reply.content, "Let me look that up.");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris","unit":"celsius"})");
  EXPECT_EQ(reply.tool_calls[0].id.substr(0, 5), "call_");
  EXPECT_EQ(reply.tool_calls[0].id.size(), 14u);
  EXPECT_TRUE(alphanumeric(reply.tool_calls[0].id.substr(5)));
}

TEST(ParseHermes, SeveralCallsGetDistinctStableIds) {
  std::string text =
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"y\": [1, {\"z\": \"}\"}]}}\n</tool_call>";
  auto reply = parse_tool_calls(F::Hermes, text);
  EXPECT_EQ(reply.content, "");
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  expect_call(reply.tool_calls[0], "a", R"({"x":1})");
  expect_call(reply.tool_calls[1], "b", R"({"y":[1,{"z":"}"}]})");
  EXPECT_NE(reply.tool_calls[0].id, reply.tool_calls[1].id);
  EXPECT_EQ(parse_tool_calls(F::Hermes, text).tool_calls[1].id, reply.tool_calls[1].id);
}

TEST(ParseHermes, KeepsArgumentKeyOrderAndUnicode) {
  auto reply = parse_tool_calls(
      F::Hermes, "<tool_call>{\"name\": \"s\", \"arguments\": {\"z\": \"日本\", \"a\": \"\\u00e9\"}}</tool_call>");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0].arguments, "{\"z\":\"日本\",\"a\":\"é\"}");
}

TEST(ParseHermes, ArgumentsAsJsonStringAreUnquoted) {
  auto reply =
      parse_tool_calls(F::Hermes, R"(<tool_call>{"name": "f", "arguments": "{\"q\": 2}"}</tool_call>)");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0].arguments, R"({"q":2})");
}

TEST(ParseHermes, MissingArgumentsAreAnEmptyObject) {
  auto reply = parse_tool_calls(F::Hermes, R"(<tool_call>{"name": "now"}</tool_call>)");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0].arguments, "{}");
}

TEST(ParseHermes, CallCutBeforeItsClosingTagStillCounts) {
  auto reply = parse_tool_calls(F::Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0].name, "f");
}

TEST(ParseHermes, MalformedCallsStayContent) {
  const std::string cases[] = {
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>",  // bad JSON
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1",                 // cut mid-object
      "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                          // no name
      "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",        // arguments not an object
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}} trailing</tool_call>",  // junk before the close
      "plain text, no call at all",
  };
  for (const auto& text : cases) {
    auto reply = parse_tool_calls(F::Hermes, text);
    EXPECT_TRUE(reply.tool_calls.empty()) << text;
    EXPECT_EQ(reply.content, text);
  }
}

TEST(ParseHermes, MalformedCallBesideAGoodOneStaysInContent) {
  auto reply = parse_tool_calls(F::Hermes,
                                "<tool_call>{oops}</tool_call>\n<tool_call>{\"name\": \"g\", \"arguments\": "
                                "{}}</tool_call> done");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0].name, "g");
  EXPECT_EQ(reply.content, "<tool_call>{oops}</tool_call>\n done");
}

TEST(ParseHermes, CallsInsideQwen3ThinkingAreNotCalls) {
  auto reply = parse_tool_calls(F::Hermes,
                                "<think>\nI could write <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>"
                                "\n</think>\n\n<tool_call>\n{\"name\": \"y\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0].name, "y");
  EXPECT_NE(reply.content.find("<think>"), std::string::npos);
}

// --- Llama 3.x -------------------------------------------------------------------------------------

TEST(ParseLlama3, JsonReplyIsACall) {
  auto reply = parse_tool_calls(F::Llama3, R"({"name": "get_weather", "parameters": {"city": "Paris"}})");
  EXPECT_EQ(reply.content, "");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris"})");
}

TEST(ParseLlama3, PythonTagAndSemicolonSeparatedCalls) {
  auto reply = parse_tool_calls(
      F::Llama3, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": 1}}");
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  expect_call(reply.tool_calls[0], "a", "{}");
  expect_call(reply.tool_calls[1], "b", R"({"k":1})");
}

TEST(ParseLlama3, BuiltinToolCallSyntax) {
  auto reply = parse_tool_calls(F::Llama3, "<|python_tag|>brave_search.call(query=\"weather in Paris\")");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "brave_search", R"({"query":"weather in Paris"})");
}

TEST(ParseLlama3, CodeAfterPythonTagIsAPythonCall) {
  auto reply = parse_tool_calls(F::Llama3, "Computing.<|python_tag|>print(2 + 2)");
  EXPECT_EQ(reply.content, "Computing.");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "python", R"x({"code":"print(2 + 2)"})x");
}

TEST(ParseLlama3, ProseAndOtherJsonStayContent) {
  for (std::string text : {std::string("The answer is {\"name\": \"x\", \"parameters\": {}}"),
                           std::string(R"({"city": "Paris"})"), std::string("Hello!"),
                           std::string(R"({"name": "a", "parameters": {}} and more)")}) {
    auto reply = parse_tool_calls(F::Llama3, text);
    EXPECT_TRUE(reply.tool_calls.empty()) << text;
    EXPECT_EQ(reply.content, text);
  }
}

// --- Mistral ---------------------------------------------------------------------------------------

TEST(ParseMistral, NemoArrayKeepsTheModelsIds) {
  auto reply = parse_tool_calls(F::Mistral,
                                R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcDEF123"}, )"
                                R"({"name": "get_time", "arguments": {}, "id": "xyz987654"}])");
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris"})");
  EXPECT_EQ(reply.tool_calls[0].id, "abcDEF123");
  EXPECT_EQ(reply.tool_calls[1].id, "xyz987654");
  EXPECT_EQ(reply.content, "");
}

TEST(ParseMistral, NewStyleCallsWithAndWithoutCallId) {
  auto reply = parse_tool_calls(F::Mistral,
                                "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}"
                                "[TOOL_CALLS]lookup[CALL_ID]Q1w2E3r4T[ARGS]{\"q\": [1, 2]}");
  EXPECT_EQ(reply.content, "Sure.");
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris"})");
  expect_call(reply.tool_calls[1], "lookup", R"({"q":[1,2]})");
  EXPECT_EQ(reply.tool_calls[1].id, "Q1w2E3r4T");
  // Generated Mistral ids are exactly 9 letters/digits, as its templates require.
  EXPECT_EQ(reply.tool_calls[0].id.size(), 9u);
  EXPECT_TRUE(alphanumeric(reply.tool_calls[0].id));
}

TEST(ParseMistral, BareArrayWithoutTheControlToken) {
  auto reply = parse_tool_calls(F::Mistral, R"( [{"name": "f", "arguments": {"a": true}}] )");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "f", R"({"a":true})");
}

TEST(ParseMistral, MalformedStaysContent) {
  for (std::string text : {std::string("[TOOL_CALLS]get_weather[ARGS]{\"city\": "),
                           std::string("[TOOL_CALLS]get_weather{\"city\": 1}"),
                           std::string("[TOOL_CALLS][{\"arguments\": {}}]"), std::string("[1, 2, 3]")}) {
    auto reply = parse_tool_calls(F::Mistral, text);
    EXPECT_TRUE(reply.tool_calls.empty()) << text;
    EXPECT_EQ(reply.content, text);
  }
}

// --- Functionary v3.2 --------------------------------------------------------------------------------

TEST(ParseFunctionary, CallAfterThePromptsArrow) {
  auto reply = parse_tool_calls(F::Functionary, "get_weather\n{\"city\": \"Paris\"}");
  EXPECT_EQ(reply.content, "");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris"})");
}

TEST(ParseFunctionary, ContentThenSeveralCalls) {
  auto reply = parse_tool_calls(F::Functionary,
                                "all\nChecking both.>>>get_weather\n{\"city\": \"Paris\"}>>>get_time\n{\"tz\": \"CET\"}");
  EXPECT_EQ(reply.content, "Checking both.");
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris"})");
  expect_call(reply.tool_calls[1], "get_time", R"({"tz":"CET"})");
}

TEST(ParseFunctionary, PlainAnswerIsContent) {
  auto reply = parse_tool_calls(F::Functionary, "all\nHello there");
  EXPECT_TRUE(reply.tool_calls.empty());
  EXPECT_EQ(reply.content, "all\nHello there");  // no calls: the text exactly as generated
}

TEST(ParseFunctionary, PythonRecipientTakesCode) {
  auto reply = parse_tool_calls(F::Functionary, "python\nprint(1)");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "python", R"x({"code":"print(1)"})x");
}

TEST(ParseFunctionary, MalformedCallStaysContent) {
  auto reply = parse_tool_calls(F::Functionary, "all\nok>>>get_weather\n{\"city\": }>>>f\n{}");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  EXPECT_EQ(reply.tool_calls[0].name, "f");
  EXPECT_EQ(reply.content, "ok>>>get_weather\n{\"city\": }");
}

// --- Command R ---------------------------------------------------------------------------------------

TEST(ParseCommandR, CommandRPlusActionBlock) {
  std::string text =
      "I will look up the weather.\nAction:\n```json\n[\n    {\n        \"tool_name\": \"get_weather\",\n"
      "        \"parameters\": {\n            \"city\": \"Paris\"\n        }\n    }\n]```\n";
  auto reply = parse_tool_calls(F::CommandR, text);
  EXPECT_EQ(reply.content, "I will look up the weather.");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris"})");
}

TEST(ParseCommandR, R7bActionTokens) {
  std::string text =
      "<|START_THINKING|>Two lookups.<|END_THINKING|><|START_ACTION|>[\n"
      "    {\"tool_call_id\": \"0\", \"tool_name\": \"a\", \"parameters\": {\"x\": 1}},\n"
      "    {\"tool_call_id\": \"1\", \"tool_name\": \"b\", \"parameters\": {}}\n]<|END_ACTION|>";
  auto reply = parse_tool_calls(F::CommandR, text);
  EXPECT_EQ(reply.content, "<|START_THINKING|>Two lookups.<|END_THINKING|>");
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  expect_call(reply.tool_calls[0], "a", R"({"x":1})");
  expect_call(reply.tool_calls[1], "b", "{}");
  EXPECT_EQ(reply.tool_calls[0].id.substr(0, 5), "call_");
}

TEST(ParseCommandR, MalformedActionStaysContent) {
  std::string text = "Action:\n```json\n[{\"tool_name\": \"a\", \"parameters\": {}}\n";  // no closing fence
  auto reply = parse_tool_calls(F::CommandR, text);
  EXPECT_TRUE(reply.tool_calls.empty());
  EXPECT_EQ(reply.content, text);
}

// --- Granite 3.x -------------------------------------------------------------------------------------

TEST(ParseGranite, ToolCallTokenThenArray) {
  auto reply = parse_tool_calls(
      F::Granite, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"n\", "
                  "\"arguments\": {}}]");
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris"})");
  expect_call(reply.tool_calls[1], "n", "{}");
  EXPECT_EQ(reply.content, "");
}

TEST(ParseGranite, MalformedStaysContent) {
  std::string text = "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}";
  auto reply = parse_tool_calls(F::Granite, text);
  EXPECT_TRUE(reply.tool_calls.empty());
  EXPECT_EQ(reply.content, text);
}

// --- DeepSeek ----------------------------------------------------------------------------------------

TEST(ParseDeepSeek, R1CallsAsItsTemplateWritesThem) {
  std::string text =
      "<think>\nweather needed\n</think>\n\n"
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
      "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>";
  auto reply = parse_tool_calls(F::DeepSeek, text);
  EXPECT_EQ(reply.content, "<think>\nweather needed\n</think>");
  ASSERT_EQ(reply.tool_calls.size(), 2u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris"})");
  expect_call(reply.tool_calls[1], "get_time", "{}");
}

TEST(ParseDeepSeek, V31NameBeforeSeparator) {
  auto reply = parse_tool_calls(F::DeepSeek,
                                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}"
                                "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Oslo"})");
}

TEST(ParseDeepSeek, DsmlInvokeBlock) {
  std::string text =
      "Checking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜function_calls>";
  auto reply = parse_tool_calls(F::DeepSeek, text);
  EXPECT_EQ(reply.content, "Checking.");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris","days":3})");
}

TEST(ParseDeepSeek, UnfinishedCallStaysContent) {
  std::string text =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Pa";
  auto reply = parse_tool_calls(F::DeepSeek, text);
  EXPECT_TRUE(reply.tool_calls.empty());
  EXPECT_EQ(reply.content, text);
}

// --- gpt-oss -----------------------------------------------------------------------------------------

TEST(ParseGptOss, HarmonyCommentaryCall) {
  std::string text =
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";
  auto reply = parse_tool_calls(F::GptOss, text);
  EXPECT_EQ(reply.content, "<|channel|>analysis<|message|>Need weather.<|end|>");
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  expect_call(reply.tool_calls[0], "get_weather", R"({"city":"Paris"})");
}

TEST(ParseGptOss, RecipientBeforeChannelAndNoControlTokens) {
  auto with_tokens = parse_tool_calls(
      F::GptOss, "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"q\": 1}<|call|>");
  ASSERT_EQ(with_tokens.tool_calls.size(), 1u);
  expect_call(with_tokens.tool_calls[0], "lookup", R"({"q":1})");
  EXPECT_EQ(with_tokens.content, "");
  auto plain = parse_tool_calls(F::GptOss, "commentary to=functions.lookup json{\"q\": 1}");
  ASSERT_EQ(plain.tool_calls.size(), 1u);
  expect_call(plain.tool_calls[0], "lookup", R"({"q":1})");
}

TEST(ParseGptOss, UnfinishedArgumentsStayContent) {
  std::string text = "<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>{\"q\": ";
  auto reply = parse_tool_calls(F::GptOss, text);
  EXPECT_TRUE(reply.tool_calls.empty());
  EXPECT_EQ(reply.content, text);
}

TEST(ParseNone, ReturnsTheTextUnchanged) {
  auto reply = parse_tool_calls(F::None, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_TRUE(reply.tool_calls.empty());
  EXPECT_EQ(reply.content, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
}

}  // namespace
}  // namespace infer::chat
