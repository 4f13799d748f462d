// Chat templates through a real redis-server: INFER.GENERATE ... CHAT and INFER.RAG ... TEMPLATE chat on
// a model that has one. stories260K has no chat template, so the suite writes a tiny random-weight
// qwen2 model (model/synth.h) carrying the qwen2 vocabulary and its Jinja template (Qwen 2.5's, ChatML
// turns) into a temporary directory; its output is noise, but deterministic noise, which is all the
// comparisons need.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "model/synth.h"
#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;

std::string vocab_path() { return vectors_dir() + "/ggml-vocab-qwen2.gguf"; }

class ChatTest : public SharedServerTest<ChatTest> {
 public:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("infer-chat-test-" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    if (fs::exists(vocab_path())) {
      model::SynthOptions o;
      o.arch = model::Arch::Qwen2;
      o.like = "tiny";
      o.type = model::SynthType::Q4_0;  // the 151,936-token vocabulary makes the embedding the bulk
      o.vocab_path = vocab_path();
      o.threads = 1;
      model::write_synth(o, model_path());
    }
    SharedServerTest<ChatTest>::SetUpTestSuite();
  }
  static void TearDownTestSuite() {
    SharedServerTest<ChatTest>::TearDownTestSuite();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::vector<std::string> module_args() {
    if (!fs::exists(model_path())) return {};
    return {"MODEL", "chat", model_path()};
  }
  void SetUp() override {
    INFER_REQUIRE_DIR(vectors_dir());
    ASSERT_TRUE(fs::exists(model_path())) << vocab_path() << " missing";
    SharedServerTest<ChatTest>::SetUp();
  }

 protected:
  static std::string model_path() { return dir_ + "/chat.gguf"; }

  // A map reply (RESP2: flat key/value array) of `argv`, checked to be one.
  Reply map_reply(const std::vector<std::string>& argv) {
    Reply r = command(c_.get(), argv);
    EXPECT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
    return r;
  }
  // Field `name` of a map reply, shown as text ("" when absent).
  static std::string field(const Reply& r, const std::string& name) {
    if (!r || r->type != REDIS_REPLY_ARRAY) return "";
    for (size_t i = 0; i + 1 < r->elements; i += 2)
      if (r->element[i]->type == REDIS_REPLY_STRING && name == r->element[i]->str) return show(r->element[i + 1]);
    return "";
  }

  // INFER.TOKENIZE chat `text` [NOBOS] STORE `key`, which replies with the number of ids.
  void tokenize_into(const std::string& key, const std::string& text, bool nobos) {
    std::vector<std::string> argv = {"INFER.TOKENIZE", "chat", text};
    if (nobos) argv.push_back("NOBOS");
    argv.insert(argv.end(), {"STORE", key});
    Reply r = command(c_.get(), argv);
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << show(r.get());
    ASSERT_GT(r->integer, 0);
  }
  // Three documents stored as token blobs (rag:d1..3) and a 3-d vector set rag:kb pointing at them.
  void store_documents() {
    // Documents end without punctuation: byte-level BPE joins punctuation with the newlines after it,
    // so only then does the text written out by hand tokenise like the stored documents plus "\n\n".
    for (const auto& [key, text] : {std::pair<std::string, std::string>{"rag:d1", "The capital of France is Paris"},
                                    {"rag:d2", "Bananas are yellow"},
                                    {"rag:d3", "Cats sleep a lot"}})
      ASSERT_NO_FATAL_FAILURE(tokenize_into(key, text, true));
    run({"DEL", "rag:kb"});
    ASSERT_EQ(run({"INFER.VADD", "rag:kb", "VALUES", "3", "1", "0", "0", "e1", "SETATTR", R"({"tokens":"rag:d1"})"}), "1");
    ASSERT_EQ(run({"INFER.VADD", "rag:kb", "VALUES", "3", "0", "1", "0", "e2", "SETATTR", R"({"tokens":"rag:d2"})"}), "1");
    ASSERT_EQ(run({"INFER.VADD", "rag:kb", "VALUES", "3", "0", "0", "1", "e3", "SETATTR", R"({"tokens":"rag:d3"})"}), "1");
  }
  // INFER.RAG on rag:kb with a query nearest e1, then e2; greedy.
  static std::vector<std::string> rag(const std::vector<std::string>& extra);

  static constexpr const char* kSystem = "<|im_start|>system\nAnswer the question using the documents below.\n\n";
  static constexpr const char* kRest =
      "<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";

  static inline std::string dir_;
};

const std::vector<std::string> kGreedy = {"MAXTOKENS", "16", "TEMP", "0"};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> ChatTest::rag(const std::vector<std::string>& extra) {
  return cat({"INFER.RAG", "chat", "rag:kb", "VALUES", "3", "1", "0.3", "0", "QUESTION", "What is the capital of France?",
              "COUNT", "2"},
             cat(kGreedy, extra));
}

TEST_F(ChatTest, ChatEqualsPromptWithTheTemplateWrittenOut) {
  const Reply chat = map_reply(cat({"INFER.GENERATE", "chat", "CHAT", "system", "You are a terse assistant.", "user",
                                    "Name three colours."},
                                   cat(kGreedy, {"WITHSTATS"})));
  const std::string text =
      "<|im_start|>system\nYou are a terse assistant.<|im_end|>\n"
      "<|im_start|>user\nName three colours.<|im_end|>\n"
      "<|im_start|>assistant\n";
  const Reply prompt = map_reply(cat({"INFER.GENERATE", "chat", "PROMPT", text}, cat(kGreedy, {"WITHSTATS"})));
  ASSERT_NE(field(chat, "ids"), "");
  EXPECT_EQ(field(chat, "ids"), field(prompt, "ids"));
  EXPECT_EQ(field(chat, "text"), field(prompt, "text"));
  EXPECT_EQ(field(chat, "generated_tokens"), "16");
  EXPECT_EQ(field(chat, "prompt_tokens"), field(prompt, "prompt_tokens"));
  // The special tokens were parsed: each is one id, so the prompt is the tokenised text's length.
  Reply ids = command(c_.get(), {"INFER.TOKENIZE", "chat", text});
  ASSERT_EQ(ids->type, REDIS_REPLY_ARRAY) << show(ids.get());
  EXPECT_EQ(field(chat, "prompt_tokens"), std::to_string(ids->elements));
  EXPECT_EQ(show(command(c_.get(), {"INFER.TOKENIZE", "chat", "<|im_start|>"}).get()).find(','), std::string::npos);

  // Multi-turn with an assistant turn, and the plain-text reply: without a system turn, Qwen 2.5's
  // template writes its own.
  const std::string turns = run(cat({"INFER.GENERATE", "chat", "CHAT", "user", "Hi", "assistant", "Hello!", "user",
                                     "Bye"},
                                    kGreedy));
  EXPECT_EQ(turns, run(cat({"INFER.GENERATE", "chat", "PROMPT",
                            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                            "assistant.<|im_end|>\n"
                            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                            "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
                           kGreedy)));
}

TEST_F(ChatTest, BadChatArgumentsAreClearErrors) {
  EXPECT_EQ(run({"INFER.GENERATE", "chat", "CHAT", "robot", "beep"}),
            "(error) ERR CHAT: message 1: role 'robot' is not system, user, assistant or tool");
  EXPECT_EQ(run({"INFER.GENERATE", "chat", "CHAT", "system", "Be brief.", "user"}),
            "(error) ERR CHAT needs role/text pairs: role 'user' has no text");
  EXPECT_EQ(run({"INFER.GENERATE", "chat", "CHAT", "user"}), "(error) ERR CHAT needs role/text pairs");
  EXPECT_EQ(run({"INFER.GENERATE", "chat", "CHAT"}), "(error) ERR CHAT needs role/text pairs");
  EXPECT_EQ(run({"INFER.GENERATE", "chat", "PROMPT", "x", "CHAT", "user", "hi"}),
            "(error) ERR CHAT cannot be combined with PROMPT or TOKENS");
  EXPECT_EQ(run({"INFER.GENERATE", "chat", "CHAT", "user", "hi", "PROMPT", "x"}),
            "(error) ERR PROMPT cannot be combined with CHAT");
  EXPECT_EQ(run({"INFER.GENERATE", "chat", "CHAT", "user", "hi", "CHAT", "user", "again"}),
            "(error) ERR CHAT given twice");
  // Options after the pairs still parse.
  const std::string ok = run({"INFER.GENERATE", "chat", "CHAT", "user", "hi", "MAXTOKENS", "2", "TEMP", "0"});
  EXPECT_EQ(ok.find("(error)"), std::string::npos) << ok;
}

TEST_F(ChatTest, RagTemplateChatEqualsGenerateOfTheAssembledPrompt) {
  ASSERT_NO_FATAL_FAILURE(store_documents());
  const Reply r = map_reply(rag({"TEMPLATE", "chat", "WITHSOURCES"}));
  ASSERT_EQ(field(r, "sources").rfind("[[e1, ", 0), 0u) << field(r, "sources");
  EXPECT_NE(field(r, "sources").find("], [e2, "), std::string::npos) << field(r, "sources");

  // The same prompt as text: system turn with the documents separated by blank lines, then the user turn.
  const std::string text = std::string(kSystem) + "The capital of France is Paris\n\nBananas are yellow\n\n" + kRest;
  const Reply g = map_reply(cat({"INFER.GENERATE", "chat", "PROMPT", text}, cat(kGreedy, {"WITHSTATS"})));
  EXPECT_EQ(field(r, "prompt_tokens"), field(g, "prompt_tokens"));
  EXPECT_EQ(field(r, "text"), field(g, "text"));

  // The same prompt as token keys: the documents' stored ids go in as they are.
  ASSERT_NO_FATAL_FAILURE(tokenize_into("rag:head", kSystem, false));
  ASSERT_NO_FATAL_FAILURE(tokenize_into("rag:sep", "\n\n", true));
  const Reply t = map_reply(cat({"INFER.GENERATE", "chat", "TOKENS", "rag:head", "rag:d1", "rag:sep", "rag:d2",
                                 "rag:sep", "PROMPT", kRest},
                                cat(kGreedy, {"WITHSTATS"})));
  EXPECT_EQ(field(t, "prompt_tokens"), field(g, "prompt_tokens"));
  EXPECT_EQ(field(t, "text"), field(g, "text"));
  EXPECT_EQ(field(t, "ids"), field(g, "ids"));

  // With a chat template, chat is the default; the plain reply is the text alone.
  EXPECT_EQ(run(rag({})), field(g, "text"));
}

TEST_F(ChatTest, RagTemplatePlainOnAChatModelIsDocumentsThenQuestion) {
  ASSERT_NO_FATAL_FAILURE(store_documents());
  const std::string plain = run(rag({"TEMPLATE", "plain"}));
  EXPECT_EQ(plain, run(cat({"INFER.GENERATE", "chat", "TOKENS", "rag:d1", "rag:d2", "PROMPT",
                            "\n\nQuestion: What is the capital of France?\nAnswer:"},
                           kGreedy)));
  EXPECT_EQ(run(rag({"TEMPLATE", "jinja"})).rfind("(error) ERR TEMPLATE jinja: unknown template 'jinja'", 0), 0u);
}

// QUERY text: the chat model embeds the query and the documents (INFER.EMBED ... STORE), retrieves, and
// generates from whatever it retrieved, which INFER.GENERATE reproduces from the returned sources.
TEST_F(ChatTest, RagQueryTextRetrievesWithTheModelsOwnEmbeddings) {
  ASSERT_NO_FATAL_FAILURE(store_documents());
  run({"DEL", "rag:emb"});
  for (const auto& [el, key, text] : {std::tuple<std::string, std::string, std::string>{
                                          "e1", "rag:d1", "The capital of France is Paris"},
                                      {"e2", "rag:d2", "Bananas are yellow"},
                                      {"e3", "rag:d3", "Cats sleep a lot"}})
    ASSERT_EQ(run({"INFER.EMBED", "chat", text, "STORE", "rag:emb", el, "SETATTR", R"({"tokens":")" + key + "\"}"}),
              "1");
  const Reply r = map_reply(cat({"INFER.RAG", "chat", "rag:emb", "QUERY", "The capital of France is Paris", "COUNT",
                                 "1", "WITHSOURCES"},
                                kGreedy));
  // The query is one of the documents, embedded the same way: it is its own nearest neighbour.
  ASSERT_EQ(field(r, "sources").rfind("[[e1, ", 0), 0u) << field(r, "sources");
  const std::string text = std::string(kSystem) + "The capital of France is Paris\n\n" +
                           "<|im_end|>\n<|im_start|>user\nThe capital of France is Paris<|im_end|>\n"
                           "<|im_start|>assistant\n";
  const Reply g = map_reply(cat({"INFER.GENERATE", "chat", "PROMPT", text}, cat(kGreedy, {"WITHSTATS"})));
  EXPECT_EQ(field(r, "prompt_tokens"), field(g, "prompt_tokens"));
  EXPECT_EQ(field(r, "text"), field(g, "text"));
}

}  // namespace
}  // namespace infer::test
