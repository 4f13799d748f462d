// INFER.EMBED through a real redis-server: POOLING last / mean, NORMALIZE, the model's default pooling,
// and that mean pooling does not depend on a warm prefix cache.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

class EmbedTest : public SharedServerTest<EmbedTest> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  // The FP32 blob reply of INFER.EMBED stories `text` `options...`, as floats (empty on error).
  std::vector<float> embed(const std::string& text, std::vector<std::string> options = {}) {
    std::vector<std::string> argv = {"INFER.EMBED", "stories", text};
    argv.insert(argv.end(), options.begin(), options.end());
    Reply r = command(c_.get(), argv);
    EXPECT_EQ(r->type, REDIS_REPLY_STRING) << show(r.get());
    if (r->type != REDIS_REPLY_STRING || r->len % 4 != 0) return {};
    std::vector<float> v(r->len / 4);
    std::memcpy(v.data(), r->str, r->len);
    return v;
  }
};

// Long enough to span several KV pages.
const std::string kText =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
    "friends. One day she saw a big red ball under a tree.";

double norm(const std::vector<float>& v) {
  double n = 0;
  for (float x : v) n += double(x) * x;
  return std::sqrt(n);
}

TEST_F(EmbedTest, MeanAndLastPoolingDifferAndAreDeterministic) {
  const std::vector<float> last = embed(kText, {"POOLING", "last"});
  const std::vector<float> mean = embed(kText, {"POOLING", "mean"});
  ASSERT_FALSE(last.empty());
  ASSERT_EQ(mean.size(), last.size());
  EXPECT_NE(mean, last);
  EXPECT_EQ(embed(kText, {"POOLING", "mean"}), mean);
  EXPECT_EQ(embed(kText, {"POOLING", "LAST"}), last);  // the value is case-insensitive
  // stories260K's GGUF has no pooling_type: the default is last.
  EXPECT_EQ(embed(kText), last);
}

TEST_F(EmbedTest, NormalizeGivesUnitLengthOtherwiseTheRawVector) {
  for (const char* pooling : {"last", "mean"}) {
    const std::vector<float> raw = embed(kText, {"POOLING", pooling});
    const std::vector<float> unit = embed(kText, {"POOLING", pooling, "NORMALIZE"});
    ASSERT_EQ(raw.size(), unit.size());
    const double n = norm(raw);
    EXPECT_GT(std::abs(n - 1.0), 1e-3) << pooling;
    EXPECT_NEAR(norm(unit), 1.0, 1e-5) << pooling;
    for (size_t i = 0; i < raw.size(); ++i) ASSERT_NEAR(unit[i], raw[i] / n, 1e-6) << pooling << " " << i;
  }
  // ARRAY carries the same numbers.
  const std::vector<float> mean = embed(kText, {"POOLING", "mean", "NORMALIZE"});
  Reply arr = command(c_.get(), {"INFER.EMBED", "stories", kText, "NORMALIZE", "ARRAY", "POOLING", "mean"});
  ASSERT_EQ(arr->type, REDIS_REPLY_ARRAY) << show(arr.get());
  ASSERT_EQ(arr->elements, mean.size());
  for (size_t i = 0; i < mean.size(); ++i) EXPECT_EQ(std::stof(arr->element[i]->str), mean[i]) << i;
}

// A generation over the same text leaves its pages in the prefix cache; mean pooling must still see
// every position (it computes them all), so the vector is unchanged.
TEST_F(EmbedTest, MeanPoolingIgnoresAWarmPrefixCache) {
  const std::vector<float> cold = embed(kText, {"POOLING", "mean"});
  const std::string gen = run({"INFER.GENERATE", "stories", "PROMPT", kText, "MAXTOKENS", "4", "TEMP", "0"});
  ASSERT_EQ(gen.find("(error)"), std::string::npos) << gen;
  EXPECT_EQ(embed(kText, {"POOLING", "mean"}), cold);
}

TEST_F(EmbedTest, MeanPooledVectorsStoreAndSearch) {
  const std::vector<float> mean = embed(kText, {"POOLING", "mean"});
  EXPECT_EQ(run({"INFER.EMBED", "stories", kText, "POOLING", "mean", "STORE", "emb:set", "doc"}), "1");
  EXPECT_EQ(run({"INFER.EMBED", "stories", "A dog ran home.", "POOLING", "mean", "STORE", "emb:set", "other"}), "1");
  const std::string blob(reinterpret_cast<const char*>(mean.data()), mean.size() * sizeof(float));
  const std::string hits = run({"INFER.VSIM", "emb:set", "FP32", blob, "COUNT", "1"});
  EXPECT_EQ(hits, "[doc]");
}

// A set made with REDUCE takes full-size vectors: EMBED STORE and a RAG text query (both n_embd = 64
// floats here) are projected like INFER.VADD / INFER.VSIM input.
TEST_F(EmbedTest, StoreAndRagQueryIntoAReducedSet) {
  std::vector<std::string> vadd = {"INFER.VADD", "emb:reduced", "REDUCE", "16", "VALUES", "64"};
  for (int i = 0; i < 64; ++i) vadd.push_back(std::to_string(std::sin(0.1 * i)));
  vadd.push_back("seed");
  ASSERT_EQ(run(vadd), "1");
  EXPECT_EQ(run({"INFER.VDIM", "emb:reduced"}), "16");
  EXPECT_EQ(run({"INFER.EMBED", "stories", kText, "STORE", "emb:reduced", "doc", "SETATTR", R"({"tokens":"emb:doc"})"}),
            "1");
  const std::vector<float> v = embed(kText);
  ASSERT_EQ(v.size(), 64u);
  const std::string blob(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  EXPECT_EQ(run({"INFER.VSIM", "emb:reduced", "FP32", blob, "COUNT", "1"}), "[doc]");
  EXPECT_EQ(run({"INFER.TOKENIZE", "stories", kText, "STORE", "emb:doc"}).rfind("(error)", 0), std::string::npos);
  const std::string rag =
      run({"INFER.RAG", "stories", "emb:reduced", "QUERY", kText, "COUNT", "1", "MAXTOKENS", "4", "TEMP", "0"});
  EXPECT_EQ(rag.rfind("(error)", 0), std::string::npos) << rag;
  // A set reduced from another size is refused with both sizes named.
  std::vector<std::string> other = {"INFER.VADD", "emb:reduced32", "REDUCE", "8", "VALUES", "32"};
  for (int i = 0; i < 32; ++i) other.push_back("1");
  other.push_back("x");
  ASSERT_EQ(run(other), "1");
  EXPECT_EQ(run({"INFER.EMBED", "stories", kText, "STORE", "emb:reduced32", "doc"}),
            "(error) ERR STORE: vector dimension mismatch: the model embeds in 64 dimensions, the set takes 32");
}

TEST_F(EmbedTest, BadPoolingIsAClearError) {
  EXPECT_EQ(run({"INFER.EMBED", "stories", "x", "POOLING", "median"}), "(error) ERR POOLING must be last, mean or cls");
  EXPECT_EQ(run({"INFER.EMBED", "stories", "x", "POOLING"}), "(error) ERR POOLING needs a value (last, mean or cls)");
}

TEST_F(EmbedTest, StoreWithoutItsArgumentsSaysWhatIsMissing) {
  const std::string want = "(error) ERR STORE needs a key and an element name: STORE key element [SETATTR json]";
  EXPECT_EQ(run({"INFER.EMBED", "stories", "x", "STORE", "k"}), want);
  EXPECT_EQ(run({"INFER.EMBED", "stories", "x", "STORE"}), want);
  EXPECT_EQ(run({"EXISTS", "k"}), "0");
}

}  // namespace
}  // namespace infer::test
