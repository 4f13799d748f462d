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
  EXPECT_EQ(convert(R"({"title":"anything","$defs":{"x":{"type":"string"}}})"), convert("true"));
  EXPECT_NE(convert("{}").find("root ::= value\n"), std::string::npos) << convert("{}");
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

TEST(JsonSchemaGbnf, RefusesCountsAndNestingPastTheLimits) {
  EXPECT_EQ(refusal(R"({"type":"string","maxLength":10001})"), "maxLength above 10000 is not supported at #/maxLength");
  EXPECT_EQ(refusal(R"({"type":"array","minItems":1e12})"), "minItems above 10000 is not supported at #/minItems");
  const std::string deep_pattern = std::string(100000, '(') + std::string(100000, ')');
  EXPECT_EQ(refusal((R"({"type":"string","pattern":")" + deep_pattern + "\"}").c_str()),
            "pattern: unsupported nesting of groups deeper than 64 at offset 65 at #/pattern");
  std::string deep_schema;
  for (int i = 0; i < 100000; ++i) deep_schema += R"({"items":)";
  deep_schema += "{}" + std::string(100000, '}');
  EXPECT_EQ(refusal(deep_schema.c_str()).rfind("schema nested deeper than 128 at #/items/items/", 0), 0u);
}

TEST(JsonSchemaGbnf, GrammarGrowsLinearlyWithOptionalMembers) {
  Json props = Json::object();
  for (int i = 0; i < 512; ++i) props.push_back({"p" + std::to_string(i), {{"type", "boolean"}}});
  const std::string g = json_schema_to_gbnf(Json{{"type", "object"}, {"properties", props}, {"additionalProperties", false}});
  EXPECT_LT(g.size(), 512u * 150);  // about 110 bytes a member: linear
  props.push_back({"one-more", true});
  try {
    json_schema_to_gbnf(Json{{"type", "object"}, {"properties", props}});
    FAIL();
  } catch (const SchemaError& e) {
    EXPECT_EQ(std::string(e.what()), "more than 512 properties in one object are not supported at #/properties");
  }
}

TEST(JsonSchemaGbnf, RefusesExponentialAllOfExpansion) {
  Json defs = Json::object();
  defs["d0"] = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  for (int i = 1; i < 40; ++i) {
    const std::string prev = "#/$defs/d" + std::to_string(i - 1);
    defs["d" + std::to_string(i)] = {{"allOf", Json::array({{{"$ref", prev}}, {{"$ref", prev}}})}};
  }
  const std::string e = [&] {
    try {
      json_schema_to_gbnf(Json{{"$defs", defs}, {"$ref", "#/$defs/d39"}});
    } catch (const SchemaError& err) {
      return std::string(err.what());
    }
    return std::string("(accepted)");
  }();
  EXPECT_NE(e.find("allOf/$ref merging grows past 20000 steps"), std::string::npos) << e;
}

TEST(JsonSchemaGbnf, RefusesUnsupportedPatternConstructs) {
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"(a)\\1"})J"),
            "pattern: unsupported backreference or octal escape \\1 at offset 4 at #/pattern");
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"a(?=b)"})J"), "pattern: unsupported lookahead (?= at offset 2 at #/pattern");
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"\\bword"})J"), "pattern: unsupported word boundary \\b at offset 1 at #/pattern");
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"a^b"})J"), "pattern: unsupported anchor ^ inside the pattern at offset 1 at #/pattern");
  EXPECT_EQ(refusal(R"J({"type":"string","pattern":"a{2,1}"})J"), "pattern: repetition {m,n} with n < m at offset 6 at #/pattern");
}

TEST(JsonSchemaGbnf, RefusesARefThatReachesItselfBeforeAnyText) {
  EXPECT_EQ(refusal(R"({"$defs":{"loop":{"anyOf":[{"$ref":"#/$defs/loop"},{"type":"null"}]}},"$ref":"#/$defs/loop"})"),
            "a $ref reaches itself before any text is written (rule 'loop' of the grammar)");
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
