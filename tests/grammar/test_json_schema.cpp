// JSON Schema → GBNF: the emitted text for small schemas, and every refusal naming its keyword and place.
#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema.h"

namespace infer::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::string convert(const char* schema) { return json_schema_to_gbnf(Json::parse(schema)); }

// The error message for a schema that must be refused.
std::string refusal(const char* schema) {
  try {
    convert(schema);
  } catch (const SchemaError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(JsonSchemaGbnf, RootRuleComesFirst) {
  const std::string g = convert(R"({"type":"boolean"})");
  EXPECT_EQ(g.rfind("root ::= ", 0), 0u) << g;
  EXPECT_NE(g.find("\"true\" | \"false\""), std::string::npos) << g;
}

TEST(JsonSchemaGbnf, EmptySchemaIsAnyValue) {
  EXPECT_EQ(convert("{}"), convert("true"));
  EXPECT_NE(convert("true").find("root ::= value\n"), std::string::npos) << convert("true");
}

TEST(JsonSchemaGbnf, PropertiesInListedOrder) {
  const std::string g = convert(
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}},
          "required":["zeta","alpha"],"additionalProperties":false})");
  const auto zeta = g.find(R"("\"zeta\":")");
  const auto alpha = g.find(R"("\"alpha\":")");
  ASSERT_NE(zeta, std::string::npos) << g;
  ASSERT_NE(alpha, std::string::npos) << g;
  EXPECT_LT(zeta, alpha) << g;
}

TEST(JsonSchemaGbnf, IntegerRangeSpelledByDigits) {
  const std::string g = convert(R"({"type":"integer","minimum":-5,"maximum":123})");
  EXPECT_NE(g.find("\"-\""), std::string::npos) << g;
  EXPECT_NE(g.find("\"2\" [0-3]"), std::string::npos) << g;
}

TEST(JsonSchemaGbnf, RecursiveRefBecomesRecursiveRule) {
  const std::string g = convert(
      R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
          "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["next"],
          "additionalProperties":false}}})");
  EXPECT_NE(g.find("root ::= node\n"), std::string::npos) << g;
  EXPECT_NE(g.find("node ::= "), std::string::npos) << g;
  EXPECT_NE(g.find("(node | null)"), std::string::npos) << g;
}

TEST(JsonSchemaGbnf, RefusesUnsupportedKeywordByNameAndPlace) {
  EXPECT_EQ(refusal(R"({"type":"object","properties":{"a":{"type":"object","patternProperties":{}}}})"),
            "unsupported keyword \"patternProperties\" at #/properties/a");
  EXPECT_EQ(refusal(R"({"uniqueItems":true})"), "unsupported keyword \"uniqueItems\" at #");
  EXPECT_EQ(refusal(R"({"type":"number","multipleOf":2})"), "unsupported keyword \"multipleOf\" at #");
}

TEST(JsonSchemaGbnf, RefusesBadValues) {
  EXPECT_EQ(refusal(R"({"type":"text"})"), "unknown type \"text\" at #/type");
  EXPECT_EQ(refusal(R"({"type":"string","minLength":-1})"), "minLength must be a non-negative integer at #/minLength");
  EXPECT_EQ(refusal(R"({"type":"string","format":"email"})"),
            "unsupported format \"email\" (supported: date, time, date-time, uuid) at #/format");
  EXPECT_EQ(refusal(R"({"$ref":"http://example.com/s.json"})"),
            "only local $ref (\"#...\") is supported, not \"http://example.com/s.json\" at #/$ref");
  EXPECT_EQ(refusal(R"({"$ref":"#/$defs/missing"})"), "$ref \"#/$defs/missing\" points at nothing at #/$ref");
  EXPECT_EQ(refusal(R"({"type":"integer","minimum":5,"maximum":4})"), "no integer lies between the bounds at #");
  EXPECT_EQ(refusal("false"), "schema false accepts nothing at #");
  EXPECT_EQ(refusal(R"({"type":"array","items":[{"type":"string"}]})"),
            "items as an array (a tuple, before draft 2020-12) is not supported: use prefixItems at #/items");
}

TEST(JsonSchemaGbnf, RefusesUnsupportedPatternConstructs) {
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"(a)\\1"})J"),
            "pattern: unsupported backreference or octal escape \\1 at offset 4 at #/pattern");
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"a(?=b)"})J"), "pattern: unsupported lookahead (?= at offset 2 at #/pattern");
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"\\bword"})J"), "pattern: unsupported word boundary \\b at offset 1 at #/pattern");
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"a^b"})J"), "pattern: unsupported anchor ^ inside the pattern at offset 1 at #/pattern");
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"a{2,1}"})J"), "pattern: repetition {m,n} with n < m at offset 6 at #/pattern");
}

TEST(JsonSchemaGbnf, RefusesAllOfThatCannotMerge) {
  EXPECT_EQ(refusal(R"({"allOf":[{"type":"string"},{"type":"integer"}]})"),
            "allOf: types \"string\" and \"integer\" have nothing in common at #/allOf/1");
  EXPECT_EQ(refusal(R"({"allOf":[{"type":"string","pattern":"a"},{"pattern":"b"}]})"),
            "allOf: two different values of \"pattern\" cannot be merged at #/allOf/1");
}

TEST(JsonSchemaGbnf, TextThatIsNotJsonNamesTheByte) {
  try {
    json_schema_text_to_gbnf(R"({"type": })");
    FAIL();
  } catch (const SchemaError& e) {
    EXPECT_EQ(std::string(e.what()), "schema is not JSON: parse error at byte 10");
  }
}

}  // namespace
}  // namespace infer::grammar
