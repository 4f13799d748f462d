// Tool calls of a finished generation: a call marked by a control token, which the generated text leaves
// out, is read from the ids (Llama 3's <|python_tag|> with the real llama-bpe vocabulary); calls in the
// text need no second reading; no template, or one without a format, gives none.
#include "engine/reply_tool_calls.h"

#include <gtest/gtest.h>

#include "engine/decode_step.h"
#include "gguf/file.h"
#include "support/chat_models.h"
#include "support/data_dirs.h"

namespace infer::engine {
namespace {

class ReplyToolCalls : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(test::vectors_dir());
    INFER_REQUIRE_DIR(test::chat_templates_root());
    auto file = gguf::File::open(test::vectors_dir() + "/ggml-vocab-llama-bpe.gguf");
    tok_ = tokenizer::Tokenizer::from_gguf(*file);
    llama_ = test::shared_template("meta-llama-Llama-3.1-8B-Instruct.jinja");
    ASSERT_FALSE(llama_.empty());
  }
  // What a generation of `text` returns: its ids, and its text as generated (control tokens left out).
  Result generated(const std::string& text) const {
    tokenizer::EncodeOptions o;
    o.add_special = false;
    Result r;
    r.ids = tok_->encode(text, o);
    for (int32_t id : r.ids) r.text += generated_piece(*tok_, id);
    return r;
  }
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::string llama_;
};

TEST_F(ReplyToolCalls, ControlTokenMarkerIsReadFromTheIds) {
  const Result r = generated("<|python_tag|>brave_search.call(query=\"Paris weather\")");
  EXPECT_EQ(r.text, "brave_search.call(query=\"Paris weather\")");  // the tag is a control token
  auto parsed = parse_result_tool_calls(*tok_, &llama_, r);
  ASSERT_TRUE(parsed);
  ASSERT_EQ(parsed->tool_calls.size(), 1u);
  EXPECT_EQ(parsed->tool_calls[0].name, "brave_search");
  EXPECT_EQ(parsed->tool_calls[0].arguments, R"({"query":"Paris weather"})");
}

TEST_F(ReplyToolCalls, CallsInTheTextAndTextWithoutCalls) {
  auto json = parse_result_tool_calls(*tok_, &llama_, generated(R"({"name": "f", "parameters": {"x": 1}})"));
  ASSERT_TRUE(json);
  EXPECT_EQ(json->tool_calls[0].arguments, R"({"x":1})");
  EXPECT_FALSE(parse_result_tool_calls(*tok_, &llama_, generated("It is sunny.<|eom_id|>")));
  EXPECT_FALSE(parse_result_tool_calls(*tok_, nullptr, generated(R"({"name": "f", "parameters": {}})")));
  const std::string gemma = test::shared_template("google-gemma-2-2b-it.jinja");
  EXPECT_FALSE(parse_result_tool_calls(*tok_, &gemma, generated(R"({"name": "f", "parameters": {}})")));
}

}  // namespace
}  // namespace infer::engine
