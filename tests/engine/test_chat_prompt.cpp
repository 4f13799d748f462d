// Chat prompts through the model's own template (engine/chat_prompt.h) on real GGUFs: stories260K's
// tensors and vocabulary with shared templates written in (Qwen3, Gemma 2, a Hermes tool_use variant, one
// that does not parse). Each prompt's ids equal the tokenisation of what the Jinja2 oracle renders, with
// BOS added only where the rendering lacks it; errors are the template's own.
#include "engine/chat_prompt.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "engine/generator.h"
#include "support/chat_models.h"
#include "tokenizer/chat_template.h"

namespace infer::engine {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const char* kQwen3 = "Qwen-Qwen3-0.6B.jinja";
const char* kGemma2 = "google-gemma-2-2b-it.jinja";
const char* kHermesTools = "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja";
const char* kBroken = "{% for m in messages %}{{ m.content }";

class ChatPromptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(test::models_dir());
    INFER_REQUIRE_DIR(test::chat_templates_root());
    stories_ = test::models_dir() + "/stories260K.gguf";
    dir_ = fs::temp_directory_path() / ("infer-chat-prompt-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A tokenizer read from a stories260K copy with these templates.
  std::unique_ptr<tokenizer::Tokenizer> with_templates(const std::string& main,
                                                       const std::vector<std::pair<std::string, std::string>>& named = {}) {
    const std::string path = (dir_ / ("m" + std::to_string(n_++) + ".gguf")).string();
    test::write_chat_model(stories_, path, main, named);
    files_.push_back(gguf::File::open(path));
    return tokenizer::Tokenizer::from_gguf(*files_.back());
  }
  static Json cases() {
    return Json::parse(test::read_text_file(test::chat_templates_root() + "/cases.json"));
  }
  static Json find_case(const std::string& name) {
    for (const auto& c : cases())
      if (c["name"] == name) return c;
    ADD_FAILURE() << "no case " << name;
    return Json::object();
  }
  static ChatRequest request(const Json& c) {
    ChatRequest r;
    r.messages = normalize_messages(c["messages"]);
    if (c.contains("tools")) r.tools = c["tools"];
    r.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    return r;
  }

  std::string stories_;
  fs::path dir_;
  int n_ = 0;
  std::vector<std::unique_ptr<gguf::File>> files_;
};

TEST_F(ChatPromptTest, TheDefaultTemplateAndNamedVariantsAreParsedOnceAndKept) {
  auto tok = with_templates(test::shared_template(kQwen3), {{"tool_use", test::shared_template(kHermesTools)},
                                                            {"broken", kBroken}});
  ASSERT_EQ(tok->named_chat_templates().size(), 2u);
  EXPECT_EQ(tok->named_chat_templates()[0].first, "tool_use");
  EXPECT_EQ(tok->named_chat_templates()[1].second, kBroken);
  const ModelChatTemplates t(*tok);
  EXPECT_EQ(t.names(), "default, tool_use, broken");
  ASSERT_NE(t.find(""), nullptr);
  EXPECT_NE(t.find("")->parsed, nullptr);
  EXPECT_EQ(t.find("")->source, test::shared_template(kQwen3));
  ASSERT_NE(t.find("broken"), nullptr);
  EXPECT_EQ(t.find("broken")->parsed, nullptr);
  EXPECT_FALSE(t.find("broken")->error.empty());
  // With tools the tool_use variant is the default choice; a name picks its template; "default" the main one.
  EXPECT_EQ(t.choose("", true), t.find("tool_use"));
  EXPECT_EQ(t.choose("", false), t.find(""));
  EXPECT_EQ(t.choose("default", true), t.find(""));
  EXPECT_EQ(t.choose("chatml", false), nullptr);
  // stories260K itself has none.
  auto plain = with_templates("");
  EXPECT_TRUE(ModelChatTemplates(*plain).empty());
}

// Every case of cases.json on Qwen3 (no BOS in the template: the tokenizer adds it) and Gemma 2 (starts
// with bos_token: no second BOS), as ids: the tokenisation of the oracle's rendering with the vocab's
// own BOS/EOS texts.
TEST_F(ChatPromptTest, PromptIdsAreTheTokenisedOracleRendering) {
  for (const char* name : {kQwen3, kGemma2}) {
    const std::string source = test::shared_template(name);
    auto tok = with_templates(source);
    const std::string bos = tok->token_text(tok->bos()), eos = tok->token_text(tok->eos());
    ASSERT_EQ(bos, "<s>");
    int rendered = 0;
    for (const Json& c : cases()) {
      SCOPED_TRACE(std::string(name) + " / " + c["name"].get<std::string>());
      const ChatRequest r = request(c);
      const std::string oracle = test::oracle_render(source, c["messages"], r.tools, r.add_generation_prompt, bos, eos);
      if (oracle.rfind("ERROR: ", 0) == 0) {
        try {
          tokenize_chat(*tok, r);
          ADD_FAILURE() << "rendered where Jinja2 fails: " << oracle;
        } catch (const ChatError& e) {
          EXPECT_EQ("ERROR: " + std::string(e.what()), oracle);
        }
        continue;
      }
      ++rendered;
      const bool starts_with_bos = oracle.rfind(bos, 0) == 0;
      EXPECT_EQ(starts_with_bos, std::string(name) == kGemma2);
      const std::vector<int32_t> ids = tokenize_chat(*tok, r);
      EXPECT_EQ(ids, tok->encode(oracle, tokenizer::EncodeOptions{!starts_with_bos, true}));
      ASSERT_FALSE(ids.empty());
      EXPECT_EQ(ids[0], tok->bos());
      EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->bos()), 1);
    }
    EXPECT_GE(rendered, 4);
  }
}

TEST_F(ChatPromptTest, ToolsPickTheToolUseVariantAndChatArgsReachTheTemplate) {
  const std::string hermes = test::shared_template(kHermesTools), qwen3 = test::shared_template(kQwen3);
  auto tok = with_templates(qwen3, {{"tool_use", hermes}});
  const ModelChatTemplates t(*tok);
  const Json offer = find_case("tools_offer");
  ChatRequest r = request(offer);
  const ChatTemplateEntry* used = nullptr;
  EXPECT_EQ(render_chat(t, *tok, r, &used), test::oracle_render(hermes, offer["messages"], offer["tools"], true, "<s>", "</s>"));
  EXPECT_EQ(used, t.find("tool_use"));
  r.template_name = "default";
  EXPECT_EQ(render_chat(t, *tok, r, &used), test::oracle_render(qwen3, offer["messages"], offer["tools"], true, "<s>", "</s>"));
  EXPECT_EQ(used, t.find(""));

  ChatRequest think = request(find_case("system_user"));
  think.extra = {{"enable_thinking", false}};
  const std::string off = render_chat(t, *tok, think);
  EXPECT_EQ(off, test::oracle_render(qwen3, find_case("system_user")["messages"], nullptr, true, "<s>", "</s>",
                                     think.extra));
  EXPECT_NE(off.find("<think>\n\n</think>"), std::string::npos) << off;
}

TEST_F(ChatPromptTest, ErrorsAreTheTemplatesOwnAndNameWhatIsWrong) {
  auto gemma = with_templates(test::shared_template(kGemma2), {{"broken", kBroken}});
  ChatRequest r = request(find_case("system_user"));
  try {
    tokenize_chat(*gemma, r);
    ADD_FAILURE() << "no error";
  } catch (const ChatError& e) {
    EXPECT_STREQ(e.what(), "raise_exception: System role not supported");
  }
  r.template_name = "broken";
  try {
    tokenize_chat(*gemma, r);
    ADD_FAILURE() << "no error";
  } catch (const ChatError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("chat template 'broken' cannot be parsed: ", 0), 0u) << e.what();
  }
  r.template_name = "nope";
  try {
    tokenize_chat(*gemma, r);
    ADD_FAILURE() << "no error";
  } catch (const ChatError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("unknown template 'nope': the model has templates default, broken; "
                                          "built-in formats: chatml, llama3",
                                          0),
              0u)
        << e.what();
  }

  // A model without a template: a built-in format by name, else an error saying so.
  auto plain = with_templates("");
  r.template_name = "";
  try {
    tokenize_chat(*plain, r);
    ADD_FAILURE() << "no error";
  } catch (const ChatError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("the model has no chat template (tokenizer.chat_template); name a "
                                          "built-in format (chatml, llama3",
                                          0),
              0u)
        << e.what();
  }
  r.template_name = "chatml";
  EXPECT_EQ(tokenize_chat(*plain, r),
            plain->encode(tokenizer::apply_chat_template(tokenizer::ChatFamily::ChatML,
                                                         {{"system", "You are a helpful assistant."},
                                                          {"user", "What is Redis?"}},
                                                         true)));
  r.tools = Json::array();
  EXPECT_THROW(tokenize_chat(*plain, r), ChatError);
}

TEST_F(ChatPromptTest, MessagesAreCheckedAndNormalised) {
  const Json m = normalize_messages(Json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "2"}])"));
  EXPECT_EQ(m[0]["content"], "a\nb");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], Json({{"x", 1}}));
  EXPECT_EQ(m[2]["tool_call_id"], "c1");

  auto error_of = [](const char* json) {
    try {
      normalize_messages(Json::parse(json));
    } catch (const ChatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"role": "user"})"), "messages must be a JSON array of {role, content} objects");
  EXPECT_EQ(error_of("[]"), "messages must hold at least one message");
  EXPECT_EQ(error_of(R"([{"role": "robot", "content": "beep"}])"),
            "message 1: role 'robot' is not system, user, assistant or tool");
  EXPECT_EQ(error_of(R"([{"content": "x"}])"), "message 1 needs a role (a string)");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": "x"}, {"role": "user"}])"), "message 2 needs content");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": [{"type": "image_url"}]}])"),
            "message 1: only content parts {\"type\": \"text\", \"text\": ...} are supported");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": "x", "tool_calls": []}])"),
            "message 1: only assistant messages carry tool_calls");

  try {
    parse_chat_json("MESSAGES", R"([{"role": "user",, }])");
    ADD_FAILURE() << "no error";
  } catch (const ChatError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("MESSAGES is not valid JSON: parse error at line 1, column 18: ", 0), 0u)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(byte 18)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infer::engine
