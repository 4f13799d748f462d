// Tool calls through a real redis-server: TOOLCHOICE required / a name constrain a stories260K copy that
// carries a tool template (Qwen 2.5's Hermes format, Llama 3.1's JSON, Mistral Nemo's array, Functionary
// v3.2's >>>name) to one call whose arguments fit
// the tool's schema; the reply (RESP2 and RESP3) and a STREAM's final entry carry it; the call goes back
// to the model with MESSAGES and renders as the Jinja2 oracle renders it; TOOLCHOICE's errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "redis/redis_server.h"
#include "support/chat_models.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

class ToolCallTest : public SharedServerTest<ToolCallTest> {
 public:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("infer-tool-call-test-" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    if (fs::exists(stories_model_path()) && fs::exists(chat_templates_root())) {
      write_chat_model(stories_model_path(), dir_ + "/qwen.gguf", shared_template("Qwen-Qwen2.5-7B-Instruct.jinja"));
      write_chat_model(stories_model_path(), dir_ + "/llama.gguf",
                       shared_template("meta-llama-Llama-3.1-8B-Instruct.jinja"));
      write_chat_model(stories_model_path(), dir_ + "/gemma.gguf", shared_template("google-gemma-2-2b-it.jinja"));
      write_chat_model(stories_model_path(), dir_ + "/mistral.gguf",
                       shared_template("mistralai-Mistral-Nemo-Instruct-2407.jinja"));
      write_chat_model(stories_model_path(), dir_ + "/functionary.gguf",
                       shared_template("meetkai-functionary-medium-v3.2.jinja"));
    }
    SharedServerTest<ToolCallTest>::SetUpTestSuite();
  }
  static void TearDownTestSuite() {
    SharedServerTest<ToolCallTest>::TearDownTestSuite();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::vector<std::string> module_args() {
    if (!fs::exists(dir_ + "/qwen.gguf")) return {};
    return {"MODEL", "qwen", dir_ + "/qwen.gguf", "MODEL", "llama", dir_ + "/llama.gguf",
            "MODEL", "gemma", dir_ + "/gemma.gguf", "MODEL", "mistral", dir_ + "/mistral.gguf",
            "MODEL", "functionary", dir_ + "/functionary.gguf"};
  }
  void SetUp() override {
    INFER_REQUIRE_DIR(chat_templates_root());
    SharedServerTest<ToolCallTest>::SetUp();
  }

 protected:
  // cases.json's tools, with strings bounded and no extra members, so that a random-weight model's
  // constrained call ends within a few hundred tokens.
  static Json tools() {
    return Json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
          "city": {"type": "string", "description": "City name", "maxLength": 12},
          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
         "required": ["city"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "search_docs", "description": "Search the knowledge base",
        "parameters": {"type": "object", "properties": {
          "query": {"type": "string", "maxLength": 16}, "k": {"type": "integer", "minimum": 1, "maximum": 9}},
         "required": ["query"], "additionalProperties": false}}}])");
  }
  static const redisReply* field(const redisReply* map, const std::string& name) {
    if (!map || map->type != REDIS_REPLY_ARRAY) return nullptr;
    for (size_t i = 0; i + 1 < map->elements; i += 2)
      if (map->element[i]->type == REDIS_REPLY_STRING && name == map->element[i]->str) return map->element[i + 1];
    return nullptr;
  }
  static std::string text_of(const redisReply* r) { return r && r->type == REDIS_REPLY_STRING ? r->str : ""; }

  // One call of a RESP2 reply, checked to have the reply's shape: [id, ..., type, function, name, ...,
  // arguments, ...]; returns {name, arguments, id}.
  struct Call {
    std::string name, arguments, id;
  };
  static std::vector<Call> calls_of(const redisReply* reply) {
    std::vector<Call> out;
    const redisReply* list = field(reply, "tool_calls");
    EXPECT_TRUE(list && list->type == REDIS_REPLY_ARRAY) << show(reply);
    if (!list || list->type != REDIS_REPLY_ARRAY) return out;
    for (size_t i = 0; i < list->elements; ++i) {
      const redisReply* m = list->element[i];
      EXPECT_EQ(text_of(field(m, "type")), "function");
      out.push_back({text_of(field(m, "name")), text_of(field(m, "arguments")), text_of(field(m, "id"))});
    }
    return out;
  }
  // The arguments satisfy get_weather's schema: city a string, unit (when given) celsius or fahrenheit.
  static void expect_weather_arguments(const std::string& arguments) {
    const Json args = Json::parse(arguments);
    ASSERT_TRUE(args.is_object()) << arguments;
    ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << arguments;
    if (args.contains("unit")) {
      EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << arguments;
    }
  }
  std::vector<std::string> weather_chat(const std::string& model, const std::string& choice) {
    return {"INFER.GENERATE", model, "CHAT", "user", "Weather in Paris?", "TOOLS", tools().dump(), "TOOLCHOICE",
            choice, "MAXTOKENS", "300"};
  }

  static inline std::string dir_;
};

TEST_F(ToolCallTest, RequiredGivesOneValidCallAtAnySeed) {
  for (const std::string model : {"qwen", "llama", "mistral", "functionary"}) {
    for (int seed = 1; seed <= 6; ++seed) {
      std::vector<std::string> argv = weather_chat(model, "required");
      argv.insert(argv.end(), {"TEMP", "1", "SEED", std::to_string(seed)});
      const Reply r = command(c_.get(), argv);
      ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << model << " seed " << seed << ": " << show(r.get());
      EXPECT_EQ(text_of(field(r.get(), "finish")), "tool_calls");
      EXPECT_EQ(text_of(field(r.get(), "text")), "");
      const auto calls = calls_of(r.get());
      ASSERT_EQ(calls.size(), 1u) << show(r.get());
      if (model == "mistral") {  // its templates require ids of 9 letters/digits
        EXPECT_EQ(calls[0].id.size(), 9u) << calls[0].id;
      } else {
        EXPECT_EQ(calls[0].id.rfind("call_", 0), 0u) << calls[0].id;
      }
      if (calls[0].name == "get_weather") {
        expect_weather_arguments(calls[0].arguments);
      } else {
        EXPECT_EQ(calls[0].name, "search_docs");
        const Json args = Json::parse(calls[0].arguments);
        EXPECT_TRUE(args.contains("query") && args["query"].is_string()) << calls[0].arguments;
        if (args.contains("k")) {
          EXPECT_TRUE(args["k"].is_number_integer()) << calls[0].arguments;
        }
      }
    }
  }
}

TEST_F(ToolCallTest, NamedChoiceCallsThatTool) {
  const Reply r = command(c_.get(), weather_chat("qwen", "get_weather"));
  const auto calls = calls_of(r.get());
  ASSERT_EQ(calls.size(), 1u) << show(r.get());
  EXPECT_EQ(calls[0].name, "get_weather");
  expect_weather_arguments(calls[0].arguments);
  // WITHSTATS: finish is tool_calls there, once.
  std::vector<std::string> argv = weather_chat("qwen", "search_docs");
  argv.push_back("WITHSTATS");
  const Reply stats = command(c_.get(), argv);
  EXPECT_EQ(text_of(field(stats.get(), "finish")), "tool_calls") << show(stats.get());
  ASSERT_EQ(calls_of(stats.get()).size(), 1u);
  EXPECT_EQ(calls_of(stats.get())[0].name, "search_docs");
  size_t finishes = 0;
  for (size_t i = 0; i < stats->elements; i += 2) finishes += text_of(stats->element[i]) == "finish";
  EXPECT_EQ(finishes, 1u);
}

TEST_F(ToolCallTest, Resp3ReplyIsAMapOfMaps) {
  Resp3Client c(server_->port());
  const Resp3Value r = c.call(weather_chat("qwen", "get_weather"));
  ASSERT_EQ(r.type, '%') << r.str;
  const Resp3Value* calls = nullptr;
  for (size_t i = 0; i + 1 < r.elems.size(); i += 2)
    if (r.elems[i].str == "tool_calls") calls = &r.elems[i + 1];
  ASSERT_TRUE(calls);
  ASSERT_EQ(calls->type, '*');
  ASSERT_EQ(calls->elems.size(), 1u);
  const Resp3Value& call = calls->elems[0];
  ASSERT_EQ(call.type, '%');
  ASSERT_EQ(call.elems.size(), 8u);
  EXPECT_EQ(call.elems[0].str, "id");
  EXPECT_EQ(call.elems[2].str, "type");
  EXPECT_EQ(call.elems[3].str, "function");
  EXPECT_EQ(call.elems[4].str, "name");
  EXPECT_EQ(call.elems[5].str, "get_weather");
  EXPECT_EQ(call.elems[6].str, "arguments");
  expect_weather_arguments(call.elems[7].str);
}

TEST_F(ToolCallTest, StreamEndsWithTheCalls) {
  std::vector<std::string> argv = weather_chat("qwen", "get_weather");
  argv.insert(argv.end(), {"STREAM", "tool:stream"});
  const Reply r = command(c_.get(), argv);
  const auto calls = calls_of(r.get());
  ASSERT_EQ(calls.size(), 1u) << show(r.get());
  const Reply entries = command(c_.get(), {"XREVRANGE", "tool:stream", "+", "-", "COUNT", "1"});
  ASSERT_EQ(entries->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(entries->elements, 1u);
  const redisReply* fields = entries->element[0]->element[1];
  EXPECT_EQ(text_of(field(fields, "finish")), "tool_calls") << show(fields);
  const Json json = Json::parse(text_of(field(fields, "tool_calls")));
  ASSERT_EQ(json.size(), 1u);
  EXPECT_EQ(json[0]["id"], calls[0].id);
  EXPECT_EQ(json[0]["type"], "function");
  EXPECT_EQ(json[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json[0]["function"]["arguments"], calls[0].arguments);
}

TEST_F(ToolCallTest, RagRequiredGivesACall) {
  ASSERT_EQ(run({"INFER.VADD", "tool:kb", "VALUES", "2", "1", "0", "d1", "SETATTR", R"({"tokens":"tool:d1"})"}), "1");
  ASSERT_NE(run({"INFER.TOKENIZE", "qwen", "It is sunny in Paris", "NOBOS", "STORE", "tool:d1"}).rfind("(error)", 0), 0u);
  const Reply r = command(c_.get(), {"INFER.RAG", "qwen", "tool:kb", "VALUES", "2", "1", "0", "QUESTION",
                                     "Weather in Paris?", "TOOLS", tools().dump(), "TOOLCHOICE", "get_weather",
                                     "MAXTOKENS", "300"});
  const auto calls = calls_of(r.get());
  ASSERT_EQ(calls.size(), 1u) << show(r.get());
  EXPECT_EQ(calls[0].name, "get_weather");
  expect_weather_arguments(calls[0].arguments);
}

// The round trip: the call goes back as the assistant's tool_calls with the tool's result, and the model
// is prompted exactly as the Jinja2 oracle renders that conversation.
TEST_F(ToolCallTest, CallAndResultGoBackWithMessages) {
  const Reply r = command(c_.get(), weather_chat("qwen", "get_weather"));
  const auto calls = calls_of(r.get());
  ASSERT_EQ(calls.size(), 1u) << show(r.get());
  Json messages = Json::array();
  messages.push_back({{"role", "user"}, {"content", "Weather in Paris?"}});
  messages.push_back({{"role", "assistant"},
                      {"content", ""},
                      {"tool_calls", Json::array({{{"id", calls[0].id},
                                                   {"type", "function"},
                                                   {"function", {{"name", calls[0].name},
                                                                 {"arguments", calls[0].arguments}}}}})}});
  messages.push_back({{"role", "tool"}, {"tool_call_id", calls[0].id}, {"content", R"({"temp": 18})"}});
  // The oracle gets the arguments as an object, as normalize_messages hands them to templates.
  Json oracle_messages = messages;
  oracle_messages[1]["tool_calls"][0]["function"]["arguments"] = Json::parse(calls[0].arguments);
  const std::string want =
      oracle_render(shared_template("Qwen-Qwen2.5-7B-Instruct.jinja"), oracle_messages, tools(), true, "<s>", "</s>");
  ASSERT_EQ(want.rfind("ERROR", 0), std::string::npos) << want;
  EXPECT_NE(want.find("<tool_response>\n{\"temp\": 18}\n</tool_response>"), std::string::npos) << want;
  const Reply stored = command(c_.get(), {"INFER.TOKENIZE", "qwen", want, "STORE", "tool:oracle"});
  ASSERT_EQ(stored->type, REDIS_REPLY_INTEGER) << show(stored.get());
  const Reply got = command(c_.get(), {"INFER.GENERATE", "qwen", "MESSAGES", messages.dump(), "TOOLS",
                                       tools().dump(), "MAXTOKENS", "8", "TEMP", "0", "WITHSTATS"});
  const Reply oracle = command(c_.get(), {"INFER.GENERATE", "qwen", "TOKENS", "tool:oracle", "MAXTOKENS", "8",
                                          "TEMP", "0", "WITHSTATS"});
  EXPECT_EQ(show(field(got.get(), "prompt_tokens")), std::to_string(stored->integer)) << show(got.get());
  EXPECT_EQ(show(field(got.get(), "ids")), show(field(oracle.get(), "ids")));
}

TEST_F(ToolCallTest, NoneAndAutoLeaveTextThatHasNoCall) {
  // Unconstrained, this model writes no call: the reply is the plain text, as without TOOLS.
  for (const char* choice : {"none", "auto", "AUTO"}) {
    const Reply r = command(c_.get(), weather_chat("qwen", choice));
    EXPECT_EQ(r->type, REDIS_REPLY_STRING) << choice << ": " << show(r.get());
  }
}

TEST_F(ToolCallTest, ErrorsSayWhatIsWrong) {
  const std::string t = tools().dump();
  EXPECT_EQ(run({"INFER.GENERATE", "qwen", "CHAT", "user", "hi", "TOOLCHOICE", "required"}),
            "(error) ERR TOOLCHOICE needs TOOLS");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen", "CHAT", "user", "hi", "TOOLS", t, "TOOLCHOICE"}),
            "(error) ERR TOOLCHOICE needs a value");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen", "CHAT", "user", "hi", "TOOLS", t, "TOOLCHOICE", ""}),
            "(error) ERR TOOLCHOICE must not be empty");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen", "CHAT", "user", "hi", "TOOLS", t, "TOOLCHOICE", std::string(1025, 'x')}),
            "(error) ERR TOOLCHOICE of 1025 bytes is longer than 1024");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen", "CHAT", "user", "hi", "TOOLS", t, "TOOLCHOICE", "auto", "TOOLCHOICE",
                 "none"}),
            "(error) ERR TOOLCHOICE given twice");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen", "CHAT", "user", "hi", "TOOLS", t, "TOOLCHOICE", "required", "FORMAT",
                 "json"}),
            "(error) ERR TOOLCHOICE required cannot be combined with FORMAT, JSONSCHEMA or GRAMMAR");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen", "CHAT", "user", "hi", "TOOLS", t, "TOOLCHOICE", "get_time"}),
            "(error) ERR TOOLCHOICE get_time: no tool of that name");
  EXPECT_EQ(run({"INFER.GENERATE", "gemma", "CHAT", "user", "hi", "TOOLS", t, "TOOLCHOICE", "required"}),
            "(error) ERR TOOLCHOICE required: the model's chat template teaches no tool-call format this module knows");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen", "CHAT", "user", "hi", "TOOLS",
                 R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "patternProperties": {}}}}])",
                 "TOOLCHOICE", "f"})
                .rfind("(error) ERR TOOLCHOICE f: tool f: ", 0),
            0u);
  EXPECT_EQ(run({"INFER.RAG", "qwen", "tool:none", "VALUES", "2", "1", "0", "QUESTION", "q", "TOOLCHOICE", "auto"}),
            "(error) ERR TOOLCHOICE needs TOOLS");
}

}  // namespace
}  // namespace infer::test
