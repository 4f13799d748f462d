// The schema corpus (tests/grammar/schemas): its expectations hold under an independent validator
// (python3-jsonschema), and every schema converts to a grammar.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace infer::grammar
