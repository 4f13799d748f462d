// INFER.RAG end to end on stories260K: documents tokenised once (INFER.TOKENIZE ... STORE), embedded into
// a set (INFER.EMBED ... STORE), retrieved and generated from in one command; the assembled prompt is
// the one INFER.GENERATE TOKENS ... PROMPT builds, so both give the same greedy output.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "support/story_documents.h"

namespace infer::test {
namespace {

const std::vector<std::string>& kDocs = kStoryDocuments;


class Rag : public SharedServerTest<Rag> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  void SetUp() override {
    SharedServerTest<Rag>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    run({"FLUSHALL"});
    for (size_t i = 0; i < kDocs.size(); ++i) {
      const std::string key = "doc:" + std::to_string(i);
      ASSERT_EQ(run({"INFER.TOKENIZE", "stories", kDocs[i], "STORE", key}).find("(error)"), std::string::npos);
      ASSERT_EQ(run({"INFER.EMBED", "stories", kDocs[i], "STORE", "kb", key, "SETATTR",
                     "{\"tokens\": \"" + key + "\", \"n\": " + std::to_string(i) + "}"}),
                "1");
    }
  }
  static std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }
  using SharedServerTest<Rag>::run;
};

TEST_F(Rag, RetrievesTheMatchingDocumentAndGeneratesLikeGenerate) {
  const std::string q = kDocs[2];
  Reply r = command(c_.get(), {"INFER.RAG", "stories", "kb", "QUERY", q, "COUNT", "2", "TEMP", "0", "MAXTOKENS", "24",
                               "WITHSOURCES"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
  ASSERT_EQ(r->elements, 6u) << show(r.get());
  EXPECT_EQ(std::string(r->element[0]->str), "text");
  const std::string text(r->element[1]->str, r->element[1]->len);
  EXPECT_FALSE(text.empty());
  const redisReply* sources = r->element[3];
  ASSERT_EQ(sources->elements, 2u) << show(r.get());
  EXPECT_EQ(std::string(sources->element[0]->element[0]->str), "doc:2");
  EXPECT_GT(std::stod(sources->element[0]->element[1]->str), 0.99);
  EXPECT_EQ(std::string(sources->element[0]->element[2]->str), "doc:2");
  const std::string second(sources->element[1]->element[2]->str);

  // The same assembled tokens through INFER.GENERATE give the same greedy continuation.
  const std::string generated = run({"INFER.GENERATE", "stories", "TOKENS", "doc:2", second, "PROMPT",
                                     "\n\nQuestion: " + q + "\nAnswer:", "TEMP", "0", "MAXTOKENS", "24"});
  EXPECT_EQ(generated, text);
  // Without WITHSOURCES the reply is the text alone.
  EXPECT_EQ(run({"INFER.RAG", "stories", "kb", "QUERY", q, "COUNT", "2", "TEMP", "0", "MAXTOKENS", "24"}), text);
}

TEST_F(Rag, FilterVectorQueryAndDocKey) {
  std::string s = run({"INFER.RAG", "stories", "kb", "QUERY", kDocs[0], "FILTER", ".n == 3", "TEMP", "0", "MAXTOKENS",
                       "4", "WITHSOURCES"});
  EXPECT_NE(s.find("sources, [[doc:3, "), std::string::npos) << s;
  EXPECT_EQ(s.find("doc:0"), std::string::npos) << s;
  Reply emb = command(c_.get(), {"INFER.EMBED", "stories", kDocs[1]});
  ASSERT_EQ(emb->type, REDIS_REPLY_STRING);
  s = run({"INFER.RAG", "stories", "kb", "FP32", std::string(emb->str, emb->len), "QUESTION", "Who wagged?", "COUNT",
           "1", "TEMP", "0", "MAXTOKENS", "4", "WITHSOURCES"});
  EXPECT_NE(s.find("sources, [[doc:1, "), std::string::npos) << s;
  // An attribute that names no document: nothing retrieved, the question alone is the prompt.
  s = run({"INFER.RAG", "stories", "kb", "QUERY", "x", "DOCKEY", "missing", "TEMP", "0", "MAXTOKENS", "4",
           "WITHSOURCES"});
  EXPECT_NE(s.find("sources, []"), std::string::npos) << s;
}

TEST_F(Rag, ChecksDocumentKeysAgainstTheCallersAcl) {
  ASSERT_EQ(run({"ACL", "SETUSER", "limited", "on", ">pw", "+@all", "~kb", "~doc:1"}), "OK");
  RedisConn c = server_->connect();
  ASSERT_EQ(run(c.get(), {"AUTH", "limited", "pw"}), "OK");
  EXPECT_NE(run(c.get(), {"INFER.RAG", "stories", "kb", "QUERY", kDocs[1], "COUNT", "1", "MAXTOKENS", "4", "WITHSOURCES"})
                .find("doc:1"),
            std::string::npos);
  const std::string denied = run(c.get(), {"INFER.RAG", "stories", "kb", "QUERY", kDocs[2], "COUNT", "1", "MAXTOKENS", "4"});
  EXPECT_EQ(denied.rfind("(error) NOPERM", 0), 0u) << denied;
  EXPECT_NE(denied.find("doc:2"), std::string::npos) << denied;
  // The set itself is a declared key: the server checks it.
  EXPECT_NE(run(c.get(), {"INFER.RAG", "stories", "other", "QUERY", "x"}).find("NOPERM"), std::string::npos);
  run({"ACL", "DELUSER", "limited"});
}

// TIMEOUT is the engine requests' deadline, not a Redis block timeout (which in 7.0 can leave a client
// with no reply): wherever the deadline lands (embedding, retrieval, generation) the client gets
// -TIMEOUT or the answer, and the connection stays usable.
TEST_F(Rag, TimeoutAlwaysReplies) {
  int timeouts = 0;
  for (int i = 0; i < 20; ++i) {
    const std::string r =
        run({"INFER.RAG", "stories", "kb", "QUERY", kDocs[i % kDocs.size()], "MAXTOKENS", "200", "TIMEOUT", "1"});
    if (r == "(error) TIMEOUT INFER.RAG did not finish within 1 ms")
      ++timeouts;
    else
      EXPECT_EQ(r.find("(error)"), std::string::npos) << r;  // "(no reply)" would fail here too
    ASSERT_EQ(run({"PING"}), "PONG");
  }
  EXPECT_GT(timeouts, 0);
}

TEST_F(Rag, UnknownModelAndWrongKeyTypeAreRefused) {
  EXPECT_NE(run({"INFER.RAG", "nope", "kb", "QUERY", "x"}).find("unknown model"), std::string::npos);
  run({"SET", "str", "x"});
  EXPECT_NE(run({"INFER.RAG", "stories", "str", "QUERY", "x"}).find("WRONGTYPE"), std::string::npos);
}

TEST_F(Rag, BadQueriesAndOptionsAreRefused) {
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "VALUES", "2", "1", "0", "QUESTION", "q"}).find("dimension mismatch"),
            std::string::npos);
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "VALUES", "2", "1", "0"}).find("needs QUESTION"), std::string::npos);
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "QUERY", "x", "FILTER", ".n =="}).find("invalid FILTER"), std::string::npos);
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "QUERY", "x", "TEMPLATE", "jinja"}).find("TEMPLATE jinja: unknown template 'jinja': the model has no chat template"),
            std::string::npos);
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "QUERY", "x", "TEMPLATE", "chat"}).find("chat template"), std::string::npos);
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "QUERY", "x", "BOGUS", "1"}).find("unknown option"), std::string::npos);
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "QUERY", "x", "MAXTOKENS", "0"}).find("MAXTOKENS must be"),
            std::string::npos);
}

// A hit whose document key is gone is skipped and listed as missing (tests/redis/test_rag_docs.cpp).
TEST_F(Rag, HitWhoseDocumentKeyIsGoneIsListedAsMissing) {
  run({"DEL", "doc:4"});
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "QUERY", kDocs[4], "COUNT", "1", "MAXTOKENS", "4", "WITHSOURCES"})
                .find("[[doc:4, 1, doc:4, missing]]"),
            std::string::npos);
}

TEST_F(Rag, MissingSetRetrievesNothingAndStillAnswers) {
  EXPECT_EQ(run({"INFER.RAG", "stories", "empty", "QUERY", "x", "MAXTOKENS", "2", "WITHSOURCES"}).find("(error)"),
            std::string::npos);
}

TEST_F(Rag, IsRefusedInsideMulti) {
  run({"MULTI"});
  run({"INFER.RAG", "stories", "kb", "QUERY", "x"});
  EXPECT_NE(run({"EXEC"}).find("cannot run inside MULTI"), std::string::npos);
}

}  // namespace
}  // namespace infer::test
