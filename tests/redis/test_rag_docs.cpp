// INFER.RAG's document keys as an operator meets them: a key evicted, expired or deleted since it was
// indexed is skipped (like a hit without DOCKEY) and listed as "missing" in WITHSOURCES, one holding no
// valid token list is skipped and listed as "invalid"; a key the caller
// may not read fails the command with NOPERM and lands in ACL LOG, on both the QUERY path (retrieval after
// the embedding, from a thread-safe context) and the vector path (retrieval in the command itself).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "support/story_documents.h"

namespace infer::test {
namespace {

const std::vector<std::string> kDocs(kStoryDocuments.begin(), kStoryDocuments.begin() + 3);

class RagDocs : public SharedServerTest<RagDocs> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  void SetUp() override {
    SharedServerTest<RagDocs>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    run({"FLUSHALL"});
    run({"ACL", "LOG", "RESET"});
    for (size_t i = 0; i < kDocs.size(); ++i) {
      const std::string key = "doc:" + std::to_string(i);
      ASSERT_EQ(run({"INFER.TOKENIZE", "stories", kDocs[i], "STORE", key}).find("(error)"), std::string::npos);
      ASSERT_EQ(run({"INFER.EMBED", "stories", kDocs[i], "STORE", "kb", "e" + std::to_string(i), "SETATTR",
                     "{\"tokens\": \"" + key + "\"}"}),
                "1");
    }
  }
  // Sources of a WITHSOURCES reply as "element key status" lines.
  static std::vector<std::string> sources(const redisReply* r) {
    std::vector<std::string> out;
    if (!r || r->type != REDIS_REPLY_ARRAY) return out;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      if (std::string(r->element[i]->str) != "sources") continue;
      for (size_t j = 0; j < r->element[i + 1]->elements; ++j) {
        const redisReply* s = r->element[i + 1]->element[j];
        if (s->elements != 4) return {"(source with " + std::to_string(s->elements) + " fields)"};
        out.push_back(std::string(s->element[0]->str) + " " + s->element[2]->str + " " + s->element[3]->str);
      }
    }
    return out;
  }
  static std::string text(const redisReply* r) {
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > 1 ? std::string(r->element[1]->str, r->element[1]->len)
                                                               : show(r);
  }
  std::string question_prompt(const std::string& q) { return "\n\nQuestion: " + q + "\nAnswer:"; }
};

TEST_F(RagDocs, DeletedDocumentKeyIsSkippedAndListedAsMissing) {
  ASSERT_EQ(run({"DEL", "doc:2"}), "1");
  const std::string q = kDocs[2];
  Reply r = command(c_.get(), {"INFER.RAG", "stories", "kb", "QUERY", q, "COUNT", "2", "TEMP", "0", "MAXTOKENS", "16",
                               "WITHSOURCES"});
  const auto s = sources(r.get());
  ASSERT_EQ(s.size(), 2u) << show(r.get());
  EXPECT_EQ(s[0], "e2 doc:2 missing");
  ASSERT_EQ(s[1].substr(s[1].size() - 5), " used") << s[1];
  const std::string used_key = s[1].substr(3, 5);  // "eN doc:N used"
  // The prompt holds only the document that exists: what GENERATE builds from that key alone.
  EXPECT_EQ(text(r.get()), run({"INFER.GENERATE", "stories", "TOKENS", used_key, "PROMPT", question_prompt(q), "TEMP",
                                "0", "MAXTOKENS", "16"}));
}

// A document key larger than the model's context is refused from its size, before it is copied on the
// main thread (like TOKENS and DETOKENIZE KEY).
TEST_F(RagDocs, DocumentKeyPastTheContextIsRefusedBeforeItIsCopied) {
  const std::string info = run({"INFER.INFO", "stories"});
  const size_t at = info.find("context, ");
  ASSERT_NE(at, std::string::npos) << info;
  const long long context = std::stoll(info.substr(at + 9));
  ASSERT_EQ(run({"DEL", "doc:1"}), "1");  // now a raw uint32 array of context + 1 zero ids
  ASSERT_EQ(run({"SETRANGE", "doc:1", std::to_string(4 * (context + 1) - 1), std::string(1, '\0')}),
            std::to_string(4 * (context + 1)));
  const std::string r = run({"INFER.RAG", "stories", "kb", "QUERY", kDocs[1], "COUNT", "3", "MAXTOKENS", "4"});
  EXPECT_EQ(r, "(error) ERR token key 'doc:1' holds " + std::to_string(context + 1) +
                   " tokens, more than the model's context of " + std::to_string(context) + " tokens");
}

TEST_F(RagDocs, ExpiredDocumentKeysAreMissingAndTheQuestionAloneIsThePrompt) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(run({"PEXPIRE", "doc:" + std::to_string(i), "1"}), "1");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string q = kDocs[0];
  Reply r = command(c_.get(), {"INFER.RAG", "stories", "kb", "QUERY", q, "COUNT", "3", "TEMP", "0", "MAXTOKENS", "16",
                               "WITHSOURCES"});
  const auto s = sources(r.get());
  ASSERT_EQ(s.size(), 3u) << show(r.get());
  for (const auto& line : s) EXPECT_EQ(line.substr(line.size() - 8), " missing") << line;
  EXPECT_EQ(text(r.get()),
            run({"INFER.GENERATE", "stories", "PROMPT", question_prompt(q), "TEMP", "0", "MAXTOKENS", "16"}));
}

// A document whose value is no token list for the model (a corrupt blob, another type, a blob of
// another vocabulary) is left out like a missing one and listed as "invalid": one bad key must not fail
// every query that retrieves it.
TEST_F(RagDocs, CorruptDocumentIsSkippedAndListedAsInvalid) {
  const std::string len = run({"STRLEN", "doc:0"});
  ASSERT_GT(std::stoll(len), 28);
  ASSERT_EQ(run({"SETRANGE", "doc:0", "4", "XXXX"}), len);  // the ITOK magic
  ASSERT_EQ(run({"DEL", "doc:1"}), "1");
  ASSERT_EQ(run({"HSET", "doc:1", "f", "v"}), "1");
  const std::string q = kDocs[2];
  Reply r = command(c_.get(), {"INFER.RAG", "stories", "kb", "QUERY", q, "COUNT", "3", "TEMP", "0", "MAXTOKENS", "16",
                               "WITHSOURCES"});
  const auto s = sources(r.get());
  ASSERT_EQ(s.size(), 3u) << show(r.get());
  std::vector<std::string> sorted = s;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::string>{"e0 doc:0 invalid", "e1 doc:1 invalid", "e2 doc:2 used"}));
  // The prompt holds only the valid document.
  EXPECT_EQ(text(r.get()), run({"INFER.GENERATE", "stories", "TOKENS", "doc:2", "PROMPT", question_prompt(q), "TEMP",
                                "0", "MAXTOKENS", "16"}));
  // Without WITHSOURCES the query still answers.
  const std::string plain = run({"INFER.RAG", "stories", "kb", "QUERY", q, "COUNT", "3", "TEMP", "0", "MAXTOKENS", "16"});
  EXPECT_EQ(plain, text(r.get()));
}

TEST_F(RagDocs, DeniedDocumentKeyFailsWithNopermAndIsInAclLog) {
  ASSERT_EQ(run({"ACL", "SETUSER", "reader", "on", ">pw", "+@all", "~kb", "~doc:0"}), "OK");
  RedisConn c = server_->connect();
  ASSERT_EQ(show(command(c.get(), {"AUTH", "reader", "pw"}).get()), "OK");
  Reply emb = command(c_.get(), {"INFER.EMBED", "stories", kDocs[1]});
  ASSERT_EQ(emb->type, REDIS_REPLY_STRING);
  const std::vector<std::vector<std::string>> requests = {
      {"INFER.RAG", "stories", "kb", "QUERY", kDocs[1], "COUNT", "1", "MAXTOKENS", "4"},
      {"INFER.RAG", "stories", "kb", "FP32", std::string(emb->str, emb->len), "QUESTION", "Who?", "COUNT", "1",
       "MAXTOKENS", "4"}};
  for (const auto& argv : requests) {
    const std::string denied = show(command(c.get(), argv).get());
    EXPECT_EQ(denied.rfind("(error) NOPERM", 0), 0u) << denied;
    EXPECT_NE(denied.find("doc:1"), std::string::npos) << denied;
  }
  Reply log = command(c_.get(), {"ACL", "LOG"});
  ASSERT_EQ(log->type, REDIS_REPLY_ARRAY) << show(log.get());
  ASSERT_GE(log->elements, 1u) << show(log.get());
  const std::string entry = show(log->element[0]);
  EXPECT_NE(entry.find("reason, key"), std::string::npos) << entry;
  EXPECT_NE(entry.find("object, doc:1"), std::string::npos) << entry;
  EXPECT_NE(entry.find("username, reader"), std::string::npos) << entry;
  EXPECT_NE(entry.find("context, module"), std::string::npos) << entry;
  EXPECT_NE(entry.find("count, 2"), std::string::npos) << entry;  // both paths, one entry counted twice
  run({"ACL", "DELUSER", "reader"});
}

TEST_F(RagDocs, DeniedKeyIsRefusedEvenWhenMissing) {
  // Existence is checked after permission: a caller learns nothing about keys it may not read.
  ASSERT_EQ(run({"ACL", "SETUSER", "reader2", "on", ">pw", "+@all", "~kb"}), "OK");
  ASSERT_EQ(run({"DEL", "doc:1"}), "1");
  RedisConn c = server_->connect();
  ASSERT_EQ(show(command(c.get(), {"AUTH", "reader2", "pw"}).get()), "OK");
  const std::string denied =
      show(command(c.get(), {"INFER.RAG", "stories", "kb", "QUERY", kDocs[1], "COUNT", "1", "MAXTOKENS", "4"}).get());
  EXPECT_EQ(denied.rfind("(error) NOPERM", 0), 0u) << denied;
  run({"ACL", "DELUSER", "reader2"});
}

}  // namespace
}  // namespace infer::test
