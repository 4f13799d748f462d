// Schema grammars as token constraints over the real qwen2 vocabulary (151,936 byte-level BPE tokens):
// texts built from uniformly random allowed tokens, whatever the model would prefer, validate under
// python3-jsonschema; and schemas mutated at random convert to a grammar the GBNF parser takes, or are
// refused with a SchemaError, never anything else.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "grammar/compiled_grammar.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "support/data_dirs.h"
#include "support/json_schema_check.h"

namespace infer::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Uniformly random allowed tokens until the grammar completes; an end-of-generation token, where
// allowed, is taken half the time. "" when the walk ran out of steps first.
std::string random_walk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937& rng, int max_steps) {
  GrammarMatcher m(g);
  std::string text;
  std::vector<int32_t> allowed;
  for (int step = 0; step < max_steps; ++step) {
    if (m.complete()) return text;
    const auto mask = m.allowed();
    allowed.clear();
    for (int32_t id = 0; id < g->vocab().n_vocab(); ++id)
      if (mask->allows(id) && !g->vocab().is_eog(id)) allowed.push_back(id);
    if (m.can_end() && (allowed.empty() || std::bernoulli_distribution(0.5)(rng))) return text;
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed after \"" << text << "\"";
      return "";
    }
    const int32_t id = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    EXPECT_TRUE(m.accept(id));
    text += g->vocab().piece(id);
  }
  return m.complete() ? text : "";
}

TEST(JsonSchemaWalks, RandomTokenTextsOfEverySchemaValidate) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = tokenizer::Tokenizer::from_gguf(*gguf::File::open(test::vectors_dir() + "/ggml-vocab-qwen2.gguf"));
  std::mt19937 rng(43);
  for (const auto& c : test::schema_corpus()) {
    const auto g = compile_grammar(json_schema_to_gbnf(c.schema), *tok);
    std::vector<std::string> texts;
    for (int walk = 0; walk < 30; ++walk)
      if (std::string t = random_walk(g, rng, 300); !t.empty()) texts.push_back(std::move(t));
    if (c.bounded) {
      EXPECT_EQ(texts.size(), 30u) << c.name << ": a walk of a bounded schema did not end";
    }
    for (const auto& t : texts) EXPECT_TRUE(grammar_accepts(g->grammar(), t)) << c.name << ": " << t;
    const auto verdicts = test::python_schema_verdicts(c.schema, texts);
    for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(verdicts[i], "") << c.name << ": " << texts[i];
  }
}

// A random node of `j` (by pre-order index), for mutation.
Json* node_at(Json& j, size_t& k) {
  if (k == 0) return &j;
  --k;
  if (j.is_object() || j.is_array())
    for (auto& child : j)
      if (Json* n = node_at(child, k)) return n;
  return nullptr;
}
size_t count_nodes(const Json& j) {
  size_t n = 1;
  if (j.is_object() || j.is_array())
    for (const auto& child : j) n += count_nodes(child);
  return n;
}

TEST(JsonSchemaWalks, MutatedSchemasConvertOrAreRefused) {
  const std::vector<Json> values = {Json(-3),      Json(0),          Json(2.5),   Json(1e300),   Json("x"),
                                    Json("#/$defs"), Json(true),     Json(false), Json(nullptr), Json::object(),
                                    Json::array(), Json::array({1, "a"}), Json{{"type", "string"}},
                                    Json{{"$ref", "#"}}, Json{{"minimum", 5}, {"maximum", 2}}};
  const std::vector<std::string> keywords = {"type", "properties", "required", "additionalProperties", "enum", "const",
                                             "items", "prefixItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf",
                                             "$ref", "minLength", "maxLength", "pattern", "format", "minimum",
                                             "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  std::mt19937 rng(7);
  int converted = 0, refused = 0;
  for (const auto& c : test::schema_corpus()) {
    for (int m = 0; m < 150; ++m) {
      Json s = c.schema;
      for (int edits = 1 + m % 3; edits > 0; --edits) {
        size_t k = std::uniform_int_distribution<size_t>(0, count_nodes(s) - 1)(rng);
        Json* n = node_at(s, k);
        if (n->is_object() && std::bernoulli_distribution(0.5)(rng)) {
          (*n)[keywords[rng() % keywords.size()]] = values[rng() % values.size()];
        } else {
          *n = values[rng() % values.size()];
        }
      }
      try {
        const std::string gbnf = json_schema_to_gbnf(s);
        EXPECT_NO_THROW(parse_gbnf(gbnf)) << s.dump() << "\n" << gbnf;
        ++converted;
      } catch (const SchemaError&) {
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what() << " for " << s.dump();
      }
    }
  }
  EXPECT_GT(converted, 100);
  EXPECT_GT(refused, 100);
}

}  // namespace
}  // namespace infer::grammar
