// Single-sequence generation on the real stories260K model: greedy output equal to the reference,
// stop strings, max tokens, teacher forcing, logits capture and input errors.
#include "engine/generator.h"

#include <gtest/gtest.h>

#include <memory>

#include "model/model.h"
#include "support/data_dirs.h"
#include "tokenizer/tokenizer.h"

namespace infer::engine {
namespace {

// shared/models/README.md: llama2.c `-t 0 -n 64 -i "Once upon a time"`, prompt included.
const std::vector<int32_t> kOnceIds = {
    1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410,
    408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388,
    426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310};
const char* kOnceText =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red "
    "ball. She wanted to play with it, but it was too high.\nLily";

class GeneratorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = test::models_dir() + "/stories260K.gguf";
    if (!std::filesystem::exists(path)) return;
    model_ = model::Model::load(path).release();
    tok_ = tokenizer::Tokenizer::from_gguf(model_->file()).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete model_;
    tok_ = nullptr;
    model_ = nullptr;
  }
  void SetUp() override {
    INFER_REQUIRE_DIR(test::models_dir());
    ASSERT_NE(model_, nullptr) << "stories260K.gguf missing from " << test::models_dir();
    GeneratorOptions o;
    o.threads = 2;
    o.context = 256;
    gen_ = std::make_unique<Generator>(*model_, tok_, o);
  }
  static GenerateOptions greedy(int n) {
    GenerateOptions g;
    g.sampling.temperature = 0;
    g.max_tokens = n;
    return g;
  }
  std::vector<int32_t> once() const { return tokenize_prompt(*tok_, "Once upon a time", false); }

  static model::Model* model_;
  static tokenizer::Tokenizer* tok_;
  std::unique_ptr<Generator> gen_;
};
model::Model* GeneratorTest::model_ = nullptr;
tokenizer::Tokenizer* GeneratorTest::tok_ = nullptr;

TEST_F(GeneratorTest, GreedyMatchesReference) {
  ASSERT_EQ(once(), std::vector<int32_t>(kOnceIds.begin(), kOnceIds.begin() + 5));
  std::string streamed;
  auto r = gen_->generate(once(), greedy(60), [&](const std::string& p) { streamed += p; });
  EXPECT_EQ(r.ids, std::vector<int32_t>(kOnceIds.begin() + 5, kOnceIds.end()));
  EXPECT_EQ(r.text, kOnceText);
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.finish, FinishReason::Length);
  EXPECT_GT(r.decode_tps, 0);
}

TEST_F(GeneratorTest, SmallPrefillChunksGiveTheSameTokens) {
  GeneratorOptions o;
  o.context = 128;
  o.prefill_chunk = 2;
  Generator g(*model_, tok_, o);
  EXPECT_EQ(g.generate(once(), greedy(20)).ids, std::vector<int32_t>(kOnceIds.begin() + 5, kOnceIds.begin() + 25));
}

// llama.cpp's rule (decode_step.h): generated text continues the prompt, a bare BOS included, so the
// first piece keeps its SentencePiece space.
TEST_F(GeneratorTest, BosOnlyPromptKeepsTheFirstPiecesSpace) {
  auto r = gen_->generate({1}, greedy(12));
  EXPECT_EQ(r.text.rfind(" Once upon a time, there was", 0), 0u) << r.text;
}

TEST_F(GeneratorTest, StopStringEndsGenerationAndIsNotInTheText) {
  auto g = greedy(60);
  g.stop = {"Lily"};
  std::string streamed;
  auto r = gen_->generate(once(), g, [&](const std::string& p) { streamed += p; });
  EXPECT_EQ(r.text, ", there was a little girl named ");
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.finish, FinishReason::Stop);
  EXPECT_EQ(r.ids.back(), 317);  // ▁Lily completed the stop string
}

TEST_F(GeneratorTest, StopStringSpanningTokens) {
  auto g = greedy(60);
  g.stop = {"girl na"};  // "▁girl" + "▁named"
  std::string streamed;
  auto r = gen_->generate(once(), g, [&](const std::string& p) { streamed += p; });
  EXPECT_EQ(r.text, ", there was a little ");
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.finish, FinishReason::Stop);
}

TEST_F(GeneratorTest, MaxTokensCapsGeneration) {
  auto r = gen_->generate(once(), greedy(3));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{432, 383, 286}));
  EXPECT_EQ(r.finish, FinishReason::Length);
}

TEST_F(GeneratorTest, ZeroTokensGivesPromptLogitsOnly) {
  auto g = greedy(0);
  g.capture_prompt_logits = true;
  g.logits_top_n = 5;
  auto r = gen_->generate(once(), g);
  EXPECT_TRUE(r.ids.empty());
  EXPECT_TRUE(r.step_logits.empty());
  ASSERT_EQ(r.prompt_logits.size(), 5u);
  // README: logits at position 0 after BOS, top = 403 (17.0235), 385 (15.4062).
  ASSERT_EQ(r.prompt_logits[0].size(), 5u);
  EXPECT_EQ(r.prompt_logits[0][0].first, 403);
  EXPECT_NEAR(r.prompt_logits[0][0].second, 17.0235f, 2e-3f);
  EXPECT_EQ(r.prompt_logits[0][1].first, 385);
  EXPECT_NEAR(r.prompt_logits[0][1].second, 15.4062f, 2e-3f);
  // Each row predicts the next prompt token's successor: the last row's argmax is the first greedy id.
  EXPECT_EQ(r.prompt_logits[4][0].first, 432);
}

TEST_F(GeneratorTest, TeacherForcingRunsExactlyTheForcedSteps) {
  auto g = greedy(1);
  g.force = {100, 200, 300, 2};  // includes EOS (2): forcing does not stop on it
  g.logits_top_n = -1;
  auto r = gen_->generate(once(), g);
  EXPECT_EQ(r.ids, g.force);
  ASSERT_EQ(r.step_logits.size(), 4u);
  EXPECT_EQ(r.step_logits[0].size(), 512u);
  EXPECT_EQ(r.step_logits[0][0].first, 432);  // step 0 is the prompt's prediction
  // Forcing the greedy ids reproduces the free-running logits.
  auto f = greedy(1);
  f.force = std::vector<int32_t>(kOnceIds.begin() + 5, kOnceIds.begin() + 15);
  f.logits_top_n = 1;
  auto rf = gen_->generate(once(), f);
  for (size_t s = 0; s < f.force.size(); ++s) EXPECT_EQ(rf.step_logits[s][0].first, f.force[s]) << s;
}

TEST_F(GeneratorTest, SeededSamplingIsReproducible) {
  GenerateOptions g;
  g.sampling.temperature = 1.0f;
  g.sampling.seed = 1234;
  g.max_tokens = 24;
  auto a = gen_->generate(once(), g);
  auto b = gen_->generate(once(), g);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.seed, 1234u);
  g.sampling.seed = 99;
  EXPECT_NE(gen_->generate(once(), g).ids, a.ids);
}

TEST_F(GeneratorTest, RejectsBadInput) {
  EXPECT_THROW(gen_->generate({}, greedy(4)), std::invalid_argument);
  EXPECT_THROW(gen_->generate({1, 512}, greedy(4)), std::invalid_argument);
  EXPECT_THROW(gen_->generate({1, -3}, greedy(4)), std::invalid_argument);
  EXPECT_THROW(gen_->generate(once(), greedy(-1)), std::invalid_argument);
  auto bad_force = greedy(1);
  bad_force.force = {1, 9999};
  EXPECT_THROW(gen_->generate(once(), bad_force), std::invalid_argument);
  auto bad_temp = greedy(4);
  bad_temp.sampling.temperature = -1;
  EXPECT_THROW(gen_->generate(once(), bad_temp), std::invalid_argument);
  GeneratorOptions small;
  small.context = 4;
  Generator g(*model_, tok_, small);
  try {
    g.generate(once(), greedy(4));
    ADD_FAILURE() << "a 5-token prompt fits a 4-token context";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("longer than the context"), std::string::npos) << e.what();
  }
}

TEST_F(GeneratorTest, ContextFullEndsWithLength) {
  GeneratorOptions small;
  small.context = 8;
  Generator g(*model_, tok_, small);
  auto r = g.generate(once(), greedy(100));
  EXPECT_EQ(r.finish, FinishReason::Length);
  EXPECT_EQ(r.ids.size(), 4u);  // positions 5..7 fed, plus the token predicted at the last one
}

TEST_F(GeneratorTest, ChatNeedsATemplate) {
  // stories260K has no chat template: a clear error, unless a family is named.
  try {
    tokenize_prompt(*tok_, "hi", true);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("chat template"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tokenize_prompt(*tok_, "hi", true, "no-such-family"), std::runtime_error);
  EXPECT_GT(tokenize_prompt(*tok_, "hi", true, "chatml").size(), tokenize_prompt(*tok_, "hi", false).size());
}

}  // namespace
}  // namespace infer::engine
