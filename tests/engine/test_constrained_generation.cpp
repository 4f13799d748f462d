// Constrained decoding on the real stories260K model: at temperature 1, every output ends by itself
// and is in the grammar's language; constrained rows are bitwise independent of batching (invariant
// 7) and reproducible for a seed.
#include <gtest/gtest.h>

#include <memory>

#include "engine/generator.h"
#include "engine_test_util.h"
#include "gguf/file.h"
#include "grammar/compiled_grammar.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace infer::engine {
namespace {

const char* kArithmetic = R"g(root  ::= expr
expr  ::= term ([-+*/] term){0,5}
term  ::= num | "(" expr ")"
num   ::= [0-9]{1,3}
)g";

const char* kList = R"g(root ::= item{1,4}
item ::= "- " [a-zA-Z ]{1,30} "\n"
)g";

// JSON with an object or array at the top, so that outputs have structure, and bounded strings and
// member counts as a schema's maxLength and maxItems bound them: stories260K at temperature 1 rarely
// closes a string it is free to continue.
const char* kJsonContainer = R"g(root   ::= object | array
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member ){0,3} )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws ){0,3} )? "]"
string ::= "\"" char{0,12} "\""
char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]{0,5} ) ( "." [0-9]{1,4} )?
ws     ::= | " "
)g";

std::vector<std::string> grammars() { return {grammar::json_value_gbnf(), kArithmetic, kList, kJsonContainer}; }

class ConstrainedGeneration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(test::stories_path())) return;
    model_ = model::Model::load(test::stories_path()).release();
    tok_ = tokenizer::Tokenizer::from_gguf(model_->file()).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete model_;
    tok_ = nullptr;
    model_ = nullptr;
  }
  void SetUp() override {
    REQUIRE_STORIES();
    ASSERT_NE(model_, nullptr);
  }
  static model::Model* model_;
  static tokenizer::Tokenizer* tok_;
};
model::Model* ConstrainedGeneration::model_ = nullptr;
tokenizer::Tokenizer* ConstrainedGeneration::tok_ = nullptr;

TEST_F(ConstrainedGeneration, TwentySeedsAtTemperatureOneEndByThemselvesInTheLanguage) {
  GeneratorOptions go;
  go.threads = 2;
  go.context = 512;
  Generator gen(*model_, tok_, go);
  const auto prompt = tokenize_prompt(*tok_, "Once upon a time", false);
  for (const std::string& gbnf : grammars()) {
    auto g = grammar::compile_grammar(gbnf, *tok_);
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      GenerateOptions o;
      o.sampling.temperature = 1.0f;
      o.sampling.seed = seed;
      o.max_tokens = 500;
      o.grammar = g;
      const GenerateResult r = gen.generate(prompt, o);
      EXPECT_EQ(r.finish, FinishReason::Stop) << "seed " << seed << " ran out of tokens: " << r.text;
      EXPECT_TRUE(grammar::grammar_accepts(g->grammar(), r.text)) << "seed " << seed << ": \"" << r.text << "\"";
    }
  }
}

TEST_F(ConstrainedGeneration, SameSeedSameOutputAndGreedyIsConstrainedToo) {
  GeneratorOptions go;
  go.threads = 1;
  go.context = 512;
  Generator gen(*model_, tok_, go);
  const auto prompt = tokenize_prompt(*tok_, "Once upon a time", false);
  GenerateOptions o;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 42;
  o.max_tokens = 300;
  o.grammar = grammar::compile_grammar(grammar::json_value_gbnf(), *tok_);
  const GenerateResult a = gen.generate(prompt, o);
  const GenerateResult b = gen.generate(prompt, o);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.text, b.text);
  o.sampling.temperature = 0;
  o.grammar = grammar::compile_grammar(kArithmetic, *tok_);
  const GenerateResult greedy = gen.generate(prompt, o);
  EXPECT_TRUE(grammar::grammar_accepts(o.grammar->grammar(), greedy.text)) << greedy.text;
}

TEST_F(ConstrainedGeneration, GeneratorRefusesAGrammarWithForcedTokens) {
  GeneratorOptions go;
  go.context = 128;
  Generator gen(*model_, tok_, go);
  GenerateOptions o;
  o.force = {403, 407};
  o.grammar = grammar::compile_grammar(kArithmetic, *tok_);
  EXPECT_THROW(gen.generate({1}, o), std::invalid_argument);
}

// Several constrained requests at once (different grammars and seeds, one unconstrained) give the ids
// each gives alone.
TEST_F(ConstrainedGeneration, ConcurrentConstrainedRequestsMatchEachAlone) {
  EngineOptions eo = test::small_options();
  eo.context = 512;
  eo.threads = 2;
  auto engine = Engine::create(eo);
  auto make = [&](int k) {
    Request r;
    r.prompt_text = k % 2 ? "Once upon a time" : "Lily had a red ball";
    r.sampling.temperature = 1.0f;
    r.sampling.seed = uint64_t(100 + k);
    r.max_tokens = 200;
    if (k != 3) r.grammar = grammar::compile_grammar(grammars()[size_t(k) % 4], engine->tokenizer());
    return r;
  };
  constexpr int kN = 6;
  std::vector<Result> alone(kN);
  for (int k = 0; k < kN; ++k) {
    test::Collector c;
    test::submit_ok(*engine, make(k), c);
    ASSERT_TRUE(c.wait());
    alone[size_t(k)] = c.result;
    if (k != 3) {
      EXPECT_EQ(c.result.finish, FinishReason::Stop) << k;
      EXPECT_TRUE(grammar::grammar_accepts(make(k).grammar->grammar(), c.result.text)) << c.result.text;
    }
  }
  std::vector<std::unique_ptr<test::Collector>> together;
  for (int k = 0; k < kN; ++k) {
    together.push_back(std::make_unique<test::Collector>());
    test::submit_ok(*engine, make(k), *together.back());
  }
  for (int k = 0; k < kN; ++k) {
    ASSERT_TRUE(together[size_t(k)]->wait());
    EXPECT_EQ(together[size_t(k)]->result.ids, alone[size_t(k)].ids) << "request " << k;
    EXPECT_EQ(together[size_t(k)]->result.text, alone[size_t(k)].text) << "request " << k;
    EXPECT_EQ(together[size_t(k)]->streamed_text, alone[size_t(k)].text) << "request " << k;
  }
}

TEST_F(ConstrainedGeneration, EngineRefusesAGrammarCompiledForAnotherVocabulary) {
  INFER_REQUIRE_DIR(infer::test::vectors_dir());
  auto file = gguf::File::open(infer::test::vectors_dir() + "/ggml-vocab-llama-spm.gguf");
  auto other = tokenizer::Tokenizer::from_gguf(*file);
  auto engine = Engine::create(test::small_options());
  Request r;
  r.prompt_text = "Once upon a time";
  r.grammar = grammar::compile_grammar(kArithmetic, *other);
  auto res = engine->submit(std::move(r), {});
  ASSERT_TRUE(std::holds_alternative<SubmitError>(res));
  EXPECT_EQ(std::get<SubmitError>(res).message, "the grammar was compiled for another vocabulary than the model's");
}

}  // namespace
}  // namespace infer::engine
