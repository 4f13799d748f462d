// A dedicated embedding model beside a generating one on a real server: a bert model loaded with
// INFER.LOAD embeds documents (INFER.EMBED ... STORE) and, as INFER.RAG's EMBEDDER, the query, while
// stories260K generates; an embedding model refuses to generate.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "support/story_documents.h"

namespace infer::test {
namespace {

const std::vector<std::string>& kDocs = kStoryDocuments;

class RagEmbedder : public SharedServerTest<RagEmbedder> {
 public:
  static std::vector<std::string> module_args() {
    return {"MODEL", "stories", stories_model_path(), "MODEL-DIR", reference_dir() + "/models"};
  }

 protected:
  void SetUp() override {
    SharedServerTest<RagEmbedder>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    INFER_REQUIRE_DIR(reference_dir());
    if (run({"INFER.MODELS"}).find("bert") == std::string::npos) {
      ASSERT_EQ(run({"INFER.LOAD", "bert", "tiny-bert-f32.gguf"}), "OK");
    }
    run({"FLUSHALL"});
    for (size_t i = 0; i < kDocs.size(); ++i) {
      const std::string key = "doc:" + std::to_string(i);
      ASSERT_EQ(run({"INFER.TOKENIZE", "stories", kDocs[i], "STORE", key}).find("(error)"), std::string::npos);
      ASSERT_EQ(run({"INFER.EMBED", "bert", kDocs[i], "STORE", "kb", "e" + std::to_string(i), "SETATTR",
                     "{\"tokens\": \"" + key + "\"}"}),
                "1");
    }
  }

  // The first source of a WITHSOURCES reply: element and score.
  std::pair<std::string, double> first_source(const std::vector<std::string>& argv) {
    auto r = command(c_.get(), argv);
    EXPECT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
      if (std::string(r->element[i]->str) != "sources" || r->element[i + 1]->elements == 0) continue;
      const redisReply* s = r->element[i + 1]->element[0];
      return {s->element[0]->str, std::stod(show(s->element[1]))};
    }
    ADD_FAILURE() << "no sources in " << show(r.get());
    return {"", 0};
  }
};

// The query is a document's own text: embedded by the same bert model it scores ~1 against itself and
// ranks first; embedded by stories260K (same width, no EMBEDDER) it does not score ~1.
TEST_F(RagEmbedder, EmbedderEmbedsTheQueryAndFindsTheDocumentFirst) {
  for (size_t i = 0; i < kDocs.size(); ++i) {
    const auto [element, score] = first_source({"INFER.RAG", "stories", "kb", "QUERY", kDocs[i], "EMBEDDER", "bert",
                                                "COUNT", "2", "MAXTOKENS", "4", "TEMP", "0", "WITHSOURCES"});
    EXPECT_EQ(element, "e" + std::to_string(i));
    EXPECT_GT(score, 0.999) << element;
  }
  const auto [element, score] = first_source({"INFER.RAG", "stories", "kb", "QUERY", kDocs[1], "COUNT", "2",
                                              "MAXTOKENS", "4", "TEMP", "0", "WITHSOURCES"});
  EXPECT_LT(score, 0.999) << "the generating model embedded the query like the bert model: " << element;
}

TEST_F(RagEmbedder, EmbeddingModelRefusesToGenerateAndUnknownEmbedderIsAnError) {
  EXPECT_NE(run({"INFER.GENERATE", "bert", "Once upon a time", "MAXTOKENS", "4"}).find("is an embedding model"),
            std::string::npos);
  EXPECT_NE(run({"INFER.RAG", "bert", "kb", "QUERY", "dog", "WITHSOURCES"}).find("is an embedding model"),
            std::string::npos);
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "QUERY", "dog", "EMBEDDER", "nope"}).find("unknown EMBEDDER model 'nope'"),
            std::string::npos);
  // the embedder's own pooling (mean, from its metadata) is what INFER.EMBED uses without POOLING
  EXPECT_EQ(run({"INFER.EMBED", "bert", kDocs[0], "ARRAY"}), run({"INFER.EMBED", "bert", kDocs[0], "POOLING", "mean", "ARRAY"}));
  EXPECT_NE(run({"INFER.EMBED", "bert", kDocs[0], "ARRAY"}), run({"INFER.EMBED", "bert", kDocs[0], "POOLING", "cls", "ARRAY"}));
}

}  // namespace
}  // namespace infer::test
