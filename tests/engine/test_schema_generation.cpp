// JSON schemas (the corpus in tests/grammar/schemas) and GBNF grammars as constraints on two real
// models: stories260K (SentencePiece, 512 tokens) and a tiny synthetic qwen3 with the real qwen2
// vocabulary (byte-level BPE, 151,936 tokens). For each, 20 seeds at temperature 1: every output ends by
// itself (finish stop, far below MAXTOKENS) and is valid: python3-jsonschema accepts it under its schema,
// the GBNF grammar accepts it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine_test_util.h"
#include "grammar/compiled_grammar.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "model/model.h"
#include "model/synth.h"
#include "support/json_schema_check.h"
#include "tokenizer/tokenizer.h"

namespace infer::engine {
namespace {

namespace fs = std::filesystem;

constexpr int kSeeds = 20;
constexpr int kMaxTokens = 1500;

// Arithmetic, a list, and JSON with bounded strings and member counts; written with comments, line
// continuations and escapes as users write them.
const std::vector<std::string> kGrammars = {
    R"g(# arithmetic over small numbers, parentheses two deep (a random model nests without end)
root ::= expr
expr ::= term ( [-+*/] term ){0,4}
term ::= [0-9]{1,3} | "(" inner ")"
inner ::= [0-9]{1,3} ( [-+*/]
          [0-9]{1,3} ){0,3}
)g",
    R"g(root ::= ( "* " word ( " " word ){0,3} "\n" ){1,3}
word ::= [a-z]{1,8}
)g",
    R"g(root   ::= "{" members? "}"
members ::= pair ( "," " "? pair ){0,2}
pair   ::= key ":" " "? value
key    ::= "\"" [a-z_]{1,6} "\""
value  ::= key | [0-9]{1,4} | "true" | "false" | "null" | "[" ( [0-9]{1,2} ( "," [0-9]{1,2} ){0,2} )? "]"
)g",
};

struct ModelUnderTest {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
};

ModelUnderTest load(const std::string& path) {
  ModelUnderTest m;
  m.model = model::Model::load(path);
  m.tok = tokenizer::Tokenizer::from_gguf(m.model->file());
  return m;
}

// Generates kSeeds outputs under `g`; every one must finish by itself.
std::vector<std::string> generate_all(const ModelUnderTest& m, const std::shared_ptr<const grammar::CompiledGrammar>& g,
                                      const std::string& what) {
  GeneratorOptions go;
  go.threads = 2;
  go.context = 2048;
  Generator gen(*m.model, m.tok.get(), go);
  const auto prompt = tokenize_prompt(*m.tok, "Once upon a time", false);
  std::vector<std::string> texts;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    GenerateOptions o;
    o.sampling.temperature = 1.0f;
    o.sampling.seed = seed;
    o.max_tokens = kMaxTokens;
    o.grammar = g;
    const GenerateResult r = gen.generate(prompt, o);
    EXPECT_EQ(r.finish, FinishReason::Stop) << what << ", seed " << seed << " did not end by itself: " << r.text;
    texts.push_back(r.text);
  }
  return texts;
}

void schemas_validate(const ModelUnderTest& m) {
  int n = 0;
  for (const auto& c : infer::test::schema_corpus()) {
    if (!c.bounded) continue;
    ++n;
    const auto g = grammar::compile_grammar(grammar::json_schema_to_gbnf(c.schema), *m.tok);
    const auto texts = generate_all(m, g, c.name);
    const auto verdicts = infer::test::python_schema_verdicts(c.schema, texts);
    ASSERT_EQ(verdicts.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(verdicts[i], "") << c.name << ", seed " << i + 1 << ": " << texts[i];
  }
  EXPECT_GE(n, 10);
}

void grammars_hold(const ModelUnderTest& m) {
  for (const auto& gbnf : kGrammars) {
    const auto g = grammar::compile_grammar(gbnf, *m.tok);
    for (const auto& t : generate_all(m, g, gbnf))
      EXPECT_TRUE(grammar::grammar_accepts(g->grammar(), t)) << gbnf << "\"" << t << "\"";
  }
}

TEST(SchemaGeneration, StoriesOutputsValidateAndEndByThemselves) {
  REQUIRE_STORIES();
  const auto m = load(test::stories_path());
  schemas_validate(m);
  grammars_hold(m);
}

// A tiny qwen3 with the qwen2 vocabulary, written for the test as `infer synth --vocab ... --like tiny`.
TEST(SchemaGeneration, ByteLevelBpe151kOutputsValidateAndEndByThemselves) {
  INFER_REQUIRE_DIR(infer::test::vectors_dir());
  const std::string vocab = infer::test::vectors_dir() + "/ggml-vocab-qwen2.gguf";
  ASSERT_TRUE(fs::exists(vocab)) << vocab;
  const fs::path path = fs::temp_directory_path() / ("infer-schema-qwen2-" + std::to_string(::getpid()) + ".gguf");
  model::SynthOptions o;
  o.arch = model::Arch::Qwen3;
  o.like = "tiny";
  o.type = model::SynthType::Q8_0;
  o.seed = 7;
  o.vocab_path = vocab;
  model::write_synth(o, path.string());
  const auto m = load(path.string());
  fs::remove(path);
  ASSERT_GT(m.tok->n_vocab(), 150000);
  schemas_validate(m);
  grammars_hold(m);
}

}  // namespace
}  // namespace infer::engine
