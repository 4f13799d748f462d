// INFER.GENERATE and INFER.RAG chat through each model's own Jinja template, on a real redis-server with
// real GGUFs: stories260K copies carrying Qwen3's template (and Hermes 2 Pro's tool_use variant), Gemma
// 2's, and stories260K itself (no template). The server's prompt is checked against the Jinja2 oracle's
// rendering tokenised by INFER.TOKENIZE and fed as TOKENS: greedy output, generated ids and prompt length
// all equal.
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

const char* kQwen3 = "Qwen-Qwen3-0.6B.jinja";
const char* kGemma2 = "google-gemma-2-2b-it.jinja";
const char* kHermesTools = "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja";

class ChatTemplateTest : public SharedServerTest<ChatTemplateTest> {
 public:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("infer-chat-template-test-" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    if (fs::exists(stories_model_path()) && fs::exists(chat_templates_root())) {
      write_chat_model(stories_model_path(), dir_ + "/qwen3.gguf", shared_template(kQwen3),
                       {{"tool_use", shared_template(kHermesTools)}});
      write_chat_model(stories_model_path(), dir_ + "/gemma.gguf", shared_template(kGemma2));
    }
    SharedServerTest<ChatTemplateTest>::SetUpTestSuite();
  }
  static void TearDownTestSuite() {
    SharedServerTest<ChatTemplateTest>::TearDownTestSuite();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::vector<std::string> module_args() {
    if (!fs::exists(dir_ + "/qwen3.gguf")) return {};
    return {"MODEL", "qwen3", dir_ + "/qwen3.gguf", "MODEL", "gemma", dir_ + "/gemma.gguf",
            "MODEL", "plain", stories_model_path()};
  }
  void SetUp() override {
    INFER_REQUIRE_DIR(chat_templates_root());
    SharedServerTest<ChatTemplateTest>::SetUp();
  }

 protected:
  static Json chat_case(const std::string& name) {
    for (const auto& c : Json::parse(read_text_file(chat_templates_root() + "/cases.json")))
      if (c["name"] == name) return c;
    ADD_FAILURE() << "no case " << name;
    return Json::object();
  }
  // Field `name` of a map reply, shown as text ("" when absent).
  static std::string field(const Reply& r, const std::string& name) {
    if (!r || r->type != REDIS_REPLY_ARRAY) return "";
    for (size_t i = 0; i + 1 < r->elements; i += 2)
      if (r->element[i]->type == REDIS_REPLY_STRING && name == r->element[i]->str) return show(r->element[i + 1]);
    return "";
  }
  static std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  // What GENERATE replies (greedy, WITHSTATS) for `model` when its prompt is the oracle's `text`
  // tokenised (with BOS unless the text starts with it), and what it replies for `chat_args`.
  void expect_same_prompt(const std::string& model, const std::string& text, const std::vector<std::string>& chat_args) {
    ASSERT_EQ(text.rfind("ERROR", 0), std::string::npos) << text;
    std::vector<std::string> tokenize = {"INFER.TOKENIZE", model, text};
    if (text.rfind("<s>", 0) == 0) tokenize.push_back("NOBOS");
    tokenize.insert(tokenize.end(), {"STORE", "chat:oracle"});
    const Reply stored = command(c_.get(), tokenize);
    ASSERT_EQ(stored->type, REDIS_REPLY_INTEGER) << show(stored.get());
    const std::vector<std::string> greedy = {"MAXTOKENS", "12", "TEMP", "0", "WITHSTATS"};
    const Reply want = command(c_.get(), cat({"INFER.GENERATE", model, "TOKENS", "chat:oracle"}, greedy));
    const Reply got = command(c_.get(), cat(cat({"INFER.GENERATE", model}, chat_args), greedy));
    ASSERT_EQ(got->type, REDIS_REPLY_ARRAY) << show(got.get());
    EXPECT_EQ(field(got, "prompt_tokens"), std::to_string(stored->integer));
    EXPECT_EQ(field(got, "prompt_tokens"), field(want, "prompt_tokens"));
    EXPECT_EQ(field(got, "ids"), field(want, "ids"));
    EXPECT_EQ(field(got, "text"), field(want, "text"));
  }

  static inline std::string dir_;
};

TEST_F(ChatTemplateTest, ChatRendersThroughTheModelsTemplate) {
  const Json c = chat_case("multi_turn");
  const std::string qwen = oracle_render(shared_template(kQwen3), c["messages"], nullptr, true, "<s>", "</s>");
  EXPECT_EQ(qwen.rfind("<|im_start|>system\nAnswer briefly.<|im_end|>\n", 0), 0u) << qwen;
  expect_same_prompt("qwen3", qwen, {"CHAT", "system", "Answer briefly.", "user", "Name a prime.", "assistant", "7",
                                     "user", "Another one?"});
  // Gemma's template starts with bos_token: the prompt has that one BOS, not a second.
  Json user_only = Json::array({{{"role", "user"}, {"content", "Hello!"}}});
  const std::string gemma = oracle_render(shared_template(kGemma2), user_only, nullptr, true, "<s>", "</s>");
  EXPECT_EQ(gemma.rfind("<s><start_of_turn>user\nHello!", 0), 0u) << gemma;
  expect_same_prompt("gemma", gemma, {"CHAT", "user", "Hello!"});
}

TEST_F(ChatTemplateTest, MessagesToolsChatArgsAndTemplate) {
  const Json call = chat_case("tools_call");
  const std::string messages = call["messages"].dump(), tools = call["tools"].dump();
  // TOOLS on a model with a tool_use variant: that variant renders.
  expect_same_prompt("qwen3",
                     oracle_render(shared_template(kHermesTools), call["messages"], call["tools"], true, "<s>", "</s>"),
                     {"MESSAGES", messages, "TOOLS", tools});
  // TEMPLATE default: the main template, with the tools.
  expect_same_prompt("qwen3", oracle_render(shared_template(kQwen3), call["messages"], call["tools"], true, "<s>", "</s>"),
                     {"MESSAGES", messages, "TOOLS", tools, "TEMPLATE", "default"});
  // CHATARGS: extra template variables.
  const Json user = Json::array({{{"role", "user"}, {"content", "Hi"}}});
  const std::string off =
      oracle_render(shared_template(kQwen3), user, nullptr, true, "<s>", "</s>", {{"enable_thinking", false}});
  EXPECT_NE(off.find("<think>"), std::string::npos) << off;
  expect_same_prompt("qwen3", off, {"CHAT", "user", "Hi", "CHATARGS", R"({"enable_thinking": false})"});
  // Content parts are joined; CHAT and MESSAGES of one conversation give one prompt.
  expect_same_prompt("qwen3", oracle_render(shared_template(kQwen3), user, nullptr, true, "<s>", "</s>"),
                     {"MESSAGES", R"([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])"});
  // A model without a template: a built-in format by name.
  expect_same_prompt("plain", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                     {"CHAT", "user", "Hi", "TEMPLATE", "chatml"});
}

TEST_F(ChatTemplateTest, ErrorsSayWhatIsWrong) {
  EXPECT_EQ(run({"INFER.GENERATE", "gemma", "CHAT", "system", "Be brief.", "user", "Hi"}),
            "(error) ERR CHAT: raise_exception: System role not supported");
  EXPECT_EQ(run({"INFER.GENERATE", "gemma", "MESSAGES", R"([{"role":"user","content":"a"},{"role":"user","content":"b"}])"}),
            "(error) ERR MESSAGES: raise_exception: Conversation roles must alternate user/assistant/user/assistant/...");
  const std::string bad = run({"INFER.GENERATE", "qwen3", "MESSAGES", R"([{"role": "user",, }])"});
  EXPECT_EQ(bad.rfind("(error) ERR MESSAGES is not valid JSON: parse error at line 1, column 18: ", 0), 0u) << bad;
  EXPECT_NE(bad.find("(byte 18)"), std::string::npos) << bad;
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "CHAT", "robot", "beep"}),
            "(error) ERR CHAT: message 1: role 'robot' is not system, user, assistant or tool");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "MESSAGES", R"({"role": "user"})"}),
            "(error) ERR MESSAGES: messages must be a JSON array of {role, content} objects");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "CHAT", "user", "hi", "TOOLS", R"({"a": 1})"}),
            "(error) ERR TOOLS must be a JSON array of tools");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "CHAT", "user", "hi", "CHATARGS", "[1]"}),
            "(error) ERR CHATARGS must be a JSON object of template variables");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "CHAT", "user", "hi", "CHATARGS", R"({"messages": []})"}),
            "(error) ERR CHATARGS may not set 'messages': the command sets it");
  const std::string unknown = run({"INFER.GENERATE", "qwen3", "CHAT", "user", "hi", "TEMPLATE", "nope"});
  EXPECT_EQ(unknown.rfind("(error) ERR CHAT: unknown template 'nope': the model has templates default, tool_use; "
                          "built-in formats: chatml, llama3, ",
                          0),
            0u)
      << unknown;
  const std::string none = run({"INFER.GENERATE", "plain", "CHAT", "user", "hi"});
  EXPECT_EQ(none.rfind("(error) ERR CHAT: the model has no chat template (tokenizer.chat_template); name a built-in "
                       "format (chatml, ",
                       0),
            0u)
      << none;
  EXPECT_EQ(run({"INFER.GENERATE", "plain", "CHAT", "user", "hi", "TEMPLATE", "chatml", "TOOLS", "[]"}),
            "(error) ERR CHAT: tools need the model's own chat template; the built-in format chatml has none");
  // The grammar of the options.
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "CHAT", "user", "hi", "MESSAGES", "[]"}),
            "(error) ERR MESSAGES cannot be combined with CHAT");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "MESSAGES", "[]", "CHAT", "user", "hi"}),
            "(error) ERR CHAT cannot be combined with MESSAGES");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "PROMPT", "x", "MESSAGES", "[]"}),
            "(error) ERR MESSAGES cannot be combined with PROMPT or TOKENS");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "MESSAGES", "[]", "PROMPT", "x"}),
            "(error) ERR PROMPT cannot be combined with MESSAGES");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "PROMPT", "x", "TOOLS", "[]"}),
            "(error) ERR TOOLS needs a chat: CHAT role text ... or MESSAGES json");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "CHAT", "user", "hi", "TOOLS", "[]", "TOOLS", "[]"}),
            "(error) ERR TOOLS given twice");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "CHAT", "user", "hi", "TEMPLATE"}), "(error) ERR TEMPLATE needs a value");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "CHAT", "user", "hi", "CHATARGS", std::string(65537, ' ')}),
            "(error) ERR CHATARGS of 65537 bytes is longer than 65536");
  EXPECT_EQ(run({"INFER.GENERATE", "qwen3", "MESSAGES", ""}), "(error) ERR MESSAGES must not be empty");
}

// INFER.RAG's chat goes through the template too: Gemma's refuses a system turn, so the documents go in
// the user turn; TEMPLATE names a variant; CHATARGS and TOOLS reach the template.
TEST_F(ChatTemplateTest, RagChatsThroughTheTemplate) {
  for (const auto& [key, text] : {std::pair<std::string, std::string>{"kb:d1", "Lily had a red ball"},
                                  {"kb:d2", "Tom liked to run"}})
    ASSERT_EQ(command(c_.get(), {"INFER.TOKENIZE", "plain", text, "NOBOS", "STORE", key})->type, REDIS_REPLY_INTEGER);
  run({"DEL", "kb"});
  ASSERT_EQ(run({"INFER.VADD", "kb", "VALUES", "2", "1", "0", "e1", "SETATTR", R"({"tokens":"kb:d1"})"}), "1");
  ASSERT_EQ(run({"INFER.VADD", "kb", "VALUES", "2", "0", "1", "e2", "SETATTR", R"({"tokens":"kb:d2"})"}), "1");
  auto rag = [&](const std::string& model, const std::vector<std::string>& extra) {
    return command(c_.get(), cat(cat({"INFER.RAG", model, "kb", "VALUES", "2", "1", "0.2", "QUESTION",
                                      "What did Lily have?", "MAXTOKENS", "8", "TEMP", "0", "WITHSOURCES"},
                                     extra),
                                 {}));
  };
  const Reply gemma = rag("gemma", {});
  ASSERT_EQ(gemma->type, REDIS_REPLY_ARRAY) << show(gemma.get());
  EXPECT_EQ(field(gemma, "sources").rfind("[[e1, ", 0), 0u) << field(gemma, "sources");
  // The same prompt written out: the documents and question in one user turn after Gemma's BOS.
  const std::string user = "Answer the question using the documents below.\n\nLily had a red ball\n\nTom liked to run\n\n"
                           "What did Lily have?";
  const std::string text = oracle_render(shared_template(kGemma2), Json::array({{{"role", "user"}, {"content", user}}}),
                                         nullptr, true, "<s>", "</s>");
  const Reply tokens = command(c_.get(), {"INFER.TOKENIZE", "gemma", text, "NOBOS"});
  ASSERT_EQ(tokens->type, REDIS_REPLY_ARRAY) << show(tokens.get());
  // Documents go in as their stored ids, so the count may differ from the text's by merges at the seams.
  const long long n = std::stoll(field(gemma, "prompt_tokens"));
  EXPECT_NEAR(static_cast<double>(n), static_cast<double>(tokens->elements), 4.0);

  const Reply qwen = rag("qwen3", {});
  const Reply qwen_off = rag("qwen3", {"CHATARGS", R"({"enable_thinking": false})"});
  ASSERT_EQ(qwen_off->type, REDIS_REPLY_ARRAY) << show(qwen_off.get());
  EXPECT_GT(std::stoll(field(qwen_off, "prompt_tokens")), std::stoll(field(qwen, "prompt_tokens")));  // <think></think>
  const Reply tools = rag("qwen3", {"TOOLS", chat_case("tools_offer")["tools"].dump()});
  ASSERT_EQ(tools->type, REDIS_REPLY_ARRAY) << show(tools.get());
  EXPECT_GT(std::stoll(field(tools, "prompt_tokens")), std::stoll(field(qwen, "prompt_tokens")) + 100);
  const Reply named = rag("qwen3", {"TEMPLATE", "tool_use"});
  ASSERT_EQ(named->type, REDIS_REPLY_ARRAY) << show(named.get());
  EXPECT_NE(field(named, "prompt_tokens"), field(qwen, "prompt_tokens"));

  EXPECT_EQ(show(rag("qwen3", {"TEMPLATE", "nope"}).get()).rfind("(error) ERR TEMPLATE nope: unknown template 'nope'", 0), 0u);
  EXPECT_EQ(show(rag("plain", {"TEMPLATE", "chat"}).get())
                .rfind("(error) ERR TEMPLATE chat: the model has no chat template (tokenizer.chat_template)", 0),
            0u);
  EXPECT_EQ(show(rag("qwen3", {"TEMPLATE", "plain", "CHATARGS", "{}"}).get()),
            "(error) ERR CHATARGS needs a chat: TEMPLATE plain has none");
  EXPECT_EQ(show(rag("qwen3", {"CHATARGS", "{"}).get()).rfind("(error) ERR CHATARGS is not valid JSON: ", 0), 0u);
}

}  // namespace
}  // namespace infer::test
