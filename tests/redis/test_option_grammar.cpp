// The command grammars as a user meets them through a real redis-server: every single-valued option
// of INFER.RAG, INFER.EMBED and INFER.GENERATE refused when given twice, INFER.RAG's generation options
// (WITHSTATS, STREAM) as the docs give them, one message form per range, options that would be silently
// ignored refused, and the documented behaviours of CONTEXT, STORE's reply and Lua.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "support/story_documents.h"

namespace infer::test {
namespace {

class OptionGrammar : public SharedServerTest<OptionGrammar> {
 public:
  static std::vector<std::string> module_args() {
    return {"MODEL", "stories", stories_model_path(), "MODEL-DIR", stories_model_dir()};
  }

 protected:
  void SetUp() override {
    SharedServerTest<OptionGrammar>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    run({"FLUSHALL"});
    for (size_t i = 0; i < 2; ++i) {
      const std::string key = "doc:" + std::to_string(i);
      ASSERT_EQ(run({"INFER.TOKENIZE", "stories", kStoryDocuments[i], "STORE", key}).find("(error)"), std::string::npos);
      ASSERT_EQ(run({"INFER.EMBED", "stories", kStoryDocuments[i], "STORE", "kb", "e" + std::to_string(i), "SETATTR",
                     "{\"tokens\": \"" + key + "\"}"}),
                "1");
    }
  }
  // The value of `field` in a map reply (RESP2: a flat array), or "" when absent.
  static std::string field(const redisReply* r, const std::string& name) {
    if (!r || r->type != REDIS_REPLY_ARRAY) return "";
    for (size_t i = 0; i + 1 < r->elements; i += 2)
      if (r->element[i]->type == REDIS_REPLY_STRING && name == r->element[i]->str) return show(r->element[i + 1]);
    return "";
  }
};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(OptionGrammar, RagRefusesEverySingleValuedOptionGivenTwice) {
  const std::vector<std::string> base = {"INFER.RAG", "stories", "kb", "QUERY", "Who?"};
  const std::vector<std::vector<std::string>> twice = {
      {"QUESTION", "a", "QUESTION", "b"},   {"COUNT", "1", "COUNT", "2"},
      {"EF", "10", "EF", "20"},             {"FILTER-EF", "10", "FILTER-EF", "20"},
      {"FILTER", ".a", "FILTER", ".b"},     {"EMBEDDER", "stories", "EMBEDDER", "stories"},
      {"DOCKEY", "tokens", "DOCKEY", "t"},  {"TEMPLATE", "plain", "TEMPLATE", "chat"},
      {"WITHSOURCES", "WITHSOURCES"},       {"WITHSTATS", "WITHSTATS"},
      {"MAXTOKENS", "4", "MAXTOKENS", "5"}, {"STREAM", "o1", "STREAM", "o2"},
      {"TEMP", "0", "TEMP", "1"},           {"SEED", "1", "SEED", "2"}};
  for (const auto& args : twice)
    EXPECT_EQ(run(cat(base, args)), "(error) ERR " + args[0] + " given twice") << args[0];
  // STOP is a list, not a single value.
  EXPECT_EQ(run(cat(base, {"STOP", "a", "STOP", "b", "MAXTOKENS", "2"})).find("(error)"), std::string::npos);
}

TEST_F(OptionGrammar, EmbedAndGenerateRefuseSingleValuedOptionsGivenTwice) {
  const std::vector<std::string> embed = {"INFER.EMBED", "stories", "text"};
  for (const auto& args : std::vector<std::vector<std::string>>{{"POOLING", "mean", "POOLING", "last"},
                                                                {"NORMALIZE", "NORMALIZE"},
                                                                {"ARRAY", "ARRAY"},
                                                                {"STORE", "s", "e", "STORE", "s", "f"}})
    EXPECT_EQ(run(cat(embed, args)), "(error) ERR " + args[0] + " given twice") << args[0];
  const std::vector<std::string> gen = {"INFER.GENERATE", "stories", "PROMPT", "Once"};
  for (const auto& args : std::vector<std::vector<std::string>>{{"PROMPT", "again"},
                                                                {"MAXTOKENS", "4", "MAXTOKENS", "5"},
                                                                {"TOPK", "4", "TOPK", "5"},
                                                                {"TIMEOUT", "100", "TIMEOUT", "200"},
                                                                {"WITHSTATS", "WITHSTATS"},
                                                                {"STREAM", "o1", "STREAM", "o2"}})
    EXPECT_EQ(run(cat(gen, args)), "(error) ERR " + args[0] + " given twice") << args[0];
}

// The README's "[generation options]" for INFER.RAG: WITHSTATS and STREAM work as on INFER.GENERATE.
TEST_F(OptionGrammar, RagTakesWithStatsAndStream) {
  Reply r = command(c_.get(), {"INFER.RAG", "stories", "kb", "QUERY", kStoryDocuments[0], "COUNT", "2", "TEMP", "0",
                               "MAXTOKENS", "12", "WITHSTATS", "WITHSOURCES", "STREAM", "rag:out"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
  EXPECT_EQ(field(r.get(), "finish"), "length");
  EXPECT_EQ(field(r.get(), "generated_tokens"), "12");
  EXPECT_NE(field(r.get(), "sources"), "");
  EXPECT_NE(field(r.get(), "prompt_tokens"), "");
  const std::string text = r->element[1]->str;
  // The stream holds the same text, then its finish entry.
  Reply entries = command(c_.get(), {"XRANGE", "rag:out", "-", "+"});
  ASSERT_EQ(entries->type, REDIS_REPLY_ARRAY) << show(entries.get());
  ASSERT_GE(entries->elements, 2u) << show(entries.get());
  std::string streamed;
  for (size_t i = 0; i + 1 < entries->elements; ++i) {
    const redisReply* kv = entries->element[i]->element[1];
    ASSERT_EQ(std::string(kv->element[0]->str), "text");
    streamed += kv->element[1]->str;
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(show(entries->element[entries->elements - 1]->element[1]), "[finish, length, tokens, 12]");
  // The same answer without the options, and a plain reply without any map option.
  EXPECT_EQ(run({"INFER.RAG", "stories", "kb", "QUERY", kStoryDocuments[0], "COUNT", "2", "TEMP", "0", "MAXTOKENS",
                 "12"}),
            text);
  // The STREAM key is a declared key (ACL, cluster routing) and must be a stream.
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.RAG", "stories", "kb", "QUERY", "q", "MAXTOKENS", "3", "STREAM", "o"}),
            "[kb, o]");
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.RAG", "stories", "kb", "QUERY", "q"}), "[kb]");
  run({"SET", "notstream", "x"});
  EXPECT_EQ(run({"INFER.RAG", "stories", "kb", "QUERY", "q", "STREAM", "notstream"}),
            "(error) WRONGTYPE STREAM key holds a value that is not a stream");
}

TEST_F(OptionGrammar, RagVectorQueryNeedsQuestion) {
  Reply emb = command(c_.get(), {"INFER.EMBED", "stories", kStoryDocuments[1]});
  ASSERT_EQ(emb->type, REDIS_REPLY_STRING);
  const std::string blob(emb->str, emb->len);
  EXPECT_EQ(run({"INFER.RAG", "stories", "kb", "FP32", blob, "MAXTOKENS", "4"}),
            "(error) ERR a vector query (FP32 or VALUES) needs QUESTION text: the question put to the model");
  EXPECT_EQ(run({"INFER.RAG", "stories", "kb", "FP32", blob, "QUESTION"}), "(error) ERR QUESTION needs a value");
  EXPECT_EQ(run({"INFER.RAG", "stories", "kb", "FP32", blob, "QUESTION", "Who?", "MAXTOKENS", "4"}).find("(error)"),
            std::string::npos);
}

TEST_F(OptionGrammar, OpenRangesHaveOneMessageForEveryBadValue) {
  for (const char* v : {"0", "2", "-1", "abc", "nan"})
    EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once", "TOPP", v}),
              "(error) ERR TOPP must be a number in (0, 1]")
        << v;
  for (const char* v : {"0", "101", "-1", "abc"})
    EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once", "REPEAT-PENALTY", v}),
              "(error) ERR REPEAT-PENALTY must be a number in (0, 100]")
        << v;
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MINP", "2"}),
            "(error) ERR MINP must be a number in [0, 1]");
}

TEST_F(OptionGrammar, StreamKeyNamedLikeAKeywordSaysWhatWasTaken) {
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once", "STREAM", "MAXTOKENS", "3"}),
            "(error) ERR STREAM needs a key: 'MAXTOKENS' is an option, and a STREAM key may not be named like one");
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "STREAM", "CHAT", "user", "hi"}),
            "(error) ERR unknown option 'user' ('CHAT' was taken as the STREAM key)");
  EXPECT_EQ(run({"INFER.RAG", "stories", "kb", "QUERY", "q", "STREAM", "COUNT", "2"}),
            "(error) ERR unknown option '2' ('COUNT' was taken as the STREAM key)");
}

TEST_F(OptionGrammar, EmbedStoreRepliesAddedOrUpdatedAndRefusesArray) {
  EXPECT_EQ(run({"INFER.EMBED", "stories", "text", "STORE", "kb", "new"}), "1");     // added
  EXPECT_EQ(run({"INFER.EMBED", "stories", "other", "STORE", "kb", "new"}), "0");    // updated
  EXPECT_EQ(run({"INFER.EMBED", "stories", "text", "ARRAY", "STORE", "kb", "x"}),
            "(error) ERR ARRAY and STORE cannot be combined: STORE replies 1 or 0, not the vector");
  EXPECT_EQ(run({"INFER.VCARD", "kb"}), "3");
}

TEST_F(OptionGrammar, LoadRefusesGpuOptionsWithoutCuda) {
  EXPECT_EQ(run({"INFER.LOAD", "g", "stories.gguf", "GPU-LAYERS", "3"}),
            "(error) ERR GPU-LAYERS applies to DEVICE cuda only");
  EXPECT_EQ(run({"INFER.LOAD", "g", "stories.gguf", "DEVICE", "cpu", "VRAM-BUDGET", "1000"}),
            "(error) ERR VRAM-BUDGET applies to DEVICE cuda only");
  EXPECT_EQ(run({"INFER.MODELS"}), "[stories]");
}

// docs/redis.md: CONTEXT above the model's trained context (stories260K: 2048) is lowered to it, and
// INFER.INFO shows the context in force; the memory example of the docs is refused as shown.
TEST_F(OptionGrammar, ContextAboveTheTrainedContextIsLoweredToIt) {
  ASSERT_EQ(run({"INFER.LOAD", "wide", "stories.gguf", "CONTEXT", "65536", "MAX-RUNNING", "2"}), "OK");
  std::string info = run({"INFER.INFO", "wide"});
  EXPECT_NE(info.find("context, 2048,"), std::string::npos) << info;
  EXPECT_EQ(run({"INFER.UNLOAD", "wide"}), "OK");
  ASSERT_EQ(run({"INFER.LOAD", "narrow", "stories.gguf", "CONTEXT", "1000", "MAX-RUNNING", "2"}), "OK");
  info = run({"INFER.INFO", "narrow"});
  EXPECT_NE(info.find("context, 1000,"), std::string::npos) << info;
  EXPECT_EQ(run({"INFER.UNLOAD", "narrow"}), "OK");
  ASSERT_EQ(run({"CONFIG", "SET", "infer.max-memory", "1gb"}), "OK");
  const std::string refused = run({"INFER.LOAD", "huge", "stories.gguf", "MAX-RUNNING", "4096", "CONTEXT", "65536"});
  run({"CONFIG", "SET", "infer.max-memory", "0"});
  EXPECT_EQ(refused.rfind("(error) ERR cannot load model 'huge': needs 5.2 GiB (weights 1.1 MiB, KV pool 5.2 GiB for "
                          "4096 sequences x 2048 tokens, scratch ",
                          0),
            0u)
      << refused;
  EXPECT_NE(refused.find("but infer.max-memory is 1.0 GiB"), std::string::npos) << refused;
}

// docs/redis.md: Lua gets Redis's own error for the deny-script commands, the module's own inside MULTI.
TEST_F(OptionGrammar, ScriptsAndMultiGetTheDocumentedErrors) {
  const std::string lua = run({"EVAL", "return redis.call('INFER.GENERATE', 'stories', 'Once')", "0"});
  EXPECT_EQ(lua.rfind("(error) ERR This Redis command is not allowed from script", 0), 0u) << lua;
  ASSERT_EQ(run({"MULTI"}), "OK");
  ASSERT_EQ(run({"INFER.GENERATE", "stories", "Once"}), "QUEUED");
  const std::string exec = run({"EXEC"});
  EXPECT_NE(exec.find("ERR INFER.GENERATE blocks the client and cannot run inside MULTI/EXEC"), std::string::npos)
      << exec;
}

}  // namespace
}  // namespace infer::test
