// The schema corpus (tests/grammar/schemas): its expectations hold under an independent validator
// (python3-jsonschema), every schema converts to a grammar, and the grammar draws the same line.
#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "support/json_schema_check.h"

namespace infer::grammar {
namespace {

TEST(JsonSchemaCorpus, ExpectationsHoldUnderPythonJsonschema) {
  const auto corpus = test::schema_corpus();
  ASSERT_GE(corpus.size(), 10u);
  for (const auto& c : corpus) {
    const auto valid = test::python_schema_verdicts(c.schema, c.valid);
    for (size_t i = 0; i < valid.size(); ++i) EXPECT_EQ(valid[i], "") << c.name << ": " << c.valid[i];
    const auto invalid = test::python_schema_verdicts(c.schema, c.invalid);
    for (size_t i = 0; i < invalid.size(); ++i) EXPECT_NE(invalid[i], "") << c.name << ": " << c.invalid[i];
  }
}

TEST(JsonSchemaCorpus, EverySchemaConverts) {
  for (const auto& c : test::schema_corpus()) {
    std::string g;
    EXPECT_NO_THROW(g = json_schema_to_gbnf(c.schema)) << c.name;
    EXPECT_EQ(g.rfind("root ::= ", 0), 0u) << c.name;
  }
}

// Through the GBNF parser: the grammar takes every valid text of the corpus (written as the converter
// writes JSON: compact, members in listed order) and none of the invalid ones.
TEST(JsonSchemaCorpus, GrammarTakesTheValidTextsAndRefusesTheInvalid) {
  for (const auto& c : test::schema_corpus()) {
    const std::string gbnf = json_schema_to_gbnf(c.schema);
    std::shared_ptr<const Grammar> g;
    ASSERT_NO_THROW(g = parse_gbnf(gbnf)) << c.name << "\n" << gbnf;
    for (const auto& t : c.valid) EXPECT_TRUE(grammar_accepts(*g, t)) << c.name << ": " << t << "\n" << gbnf;
    for (const auto& t : c.invalid) EXPECT_FALSE(grammar_accepts(*g, t)) << c.name << ": " << t << "\n" << gbnf;
  }
}

}  // namespace
}  // namespace infer::grammar
