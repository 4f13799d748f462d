#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "vector/filter.h"

using infer::vector::Filter;
using infer::vector::FilterError;

namespace {
bool match(const char* expr, const char* json) { return Filter::parse(expr).matches(std::string_view(json)); }
}  // namespace

TEST(Filter, ComparesNumbersAndStrings) {
  const char* movie = R"({"year": 1984, "rating": 4.5, "genre": "action", "seen": true})";
  EXPECT_TRUE(match(".year > 1950", movie));
  EXPECT_FALSE(match(".year < 1950", movie));
  EXPECT_TRUE(match(".year >= 1984 && .year <= 1984", movie));
  EXPECT_TRUE(match(".genre == \"action\"", movie));
  EXPECT_TRUE(match(".genre != 'drama'", movie));
  EXPECT_TRUE(match(".seen == 1 and .seen == true", movie));
  EXPECT_TRUE(match(".rating * 2 == 9", movie));
  EXPECT_TRUE(match(".year % 100 == 84 and 2 ** 3 ** 2 == 512", movie));
  EXPECT_TRUE(match("-.rating < 0", movie));
}

TEST(Filter, LogicPrecedenceAndParentheses) {
  const char* j = R"({"a": 1, "b": 2})";
  EXPECT_TRUE(match(".a == 1 or .b == 3 and .a == 5", j));    // and binds tighter
  EXPECT_FALSE(match("(.a == 1 or .b == 3) and .a == 5", j));
  EXPECT_TRUE(match("not (.a == 2)", j));
  EXPECT_TRUE(match("!(.a == 2) || .b == 0", j));
  EXPECT_TRUE(match(".a + .b * 2 == 5", j));
}

TEST(Filter, InWorksOnArraysAndSubstrings) {
  const char* j = R"({"tags": ["sci-fi", "classic"], "title": "The Matrix", "n": 3})";
  EXPECT_TRUE(match("\"classic\" in .tags", j));
  EXPECT_FALSE(match("\"drama\" in .tags", j));
  EXPECT_TRUE(match(".n in [1, 2, 3]", j));
  EXPECT_FALSE(match(".n in []", j));
  EXPECT_TRUE(match("'Mat' in .title", j));
}

TEST(Filter, MissingFieldsAndBadJsonDoNotMatch) {
  EXPECT_FALSE(match(".year > 1950", R"({"rating": 3})"));
  EXPECT_FALSE(match(".year > 1950", "not json"));
  EXPECT_FALSE(match(".year > 1950", ""));
  EXPECT_FALSE(match(".year > 1950", "[1, 2]"));
  EXPECT_FALSE(match(".name > 3", R"({"name": "x"})"));  // wrong operand types
  EXPECT_TRUE(match(".year > 1950 or .rating == 3", R"({"rating": 3})"));
}

TEST(Filter, RejectsMalformedExpressions) {
  for (const char* bad : {"", ".year >", "(.a == 1", ".a == 1)", ".a = 1", "year > 3", "\"open", ".a == [1, 2",
                          "1abc", ".a @ 2", "and .a", ".a == 1 .b == 2"}) {
    EXPECT_THROW(Filter::parse(bad), FilterError) << bad;
  }
  std::string deep(5000, '(');
  EXPECT_THROW(Filter::parse(deep), FilterError);
  // One byte past kFilterMaxBytes is refused from its length; the longest accepted string literal parses.
  const std::string at_limit = "\"" + std::string(infer::vector::kFilterMaxBytes - 2, 'a') + "\"";
  EXPECT_NO_THROW(Filter::parse(at_limit));
  EXPECT_THROW(Filter::parse(at_limit + " "), FilterError);
  try {
    Filter::parse(".a == 1 )");
  } catch (const FilterError& e) {
    EXPECT_NE(std::string(e.what()).find("offset 8"), std::string::npos) << e.what();
  }
}

namespace {
std::string chain(const char* first, const char* link, size_t links) {
  std::string s = first;
  for (size_t i = 0; i < links; ++i) s += link;
  return s;
}
std::string parse_error(const std::string& expr) {
  try {
    Filter::parse(expr);
  } catch (const FilterError& e) {
    return e.what();
  }
  return "(parsed)";
}
}  // namespace

TEST(Filter, LongAndOrChainsAreOneLevelDeep) {
  // 1000 operands of `and` are 3001 nodes but one level: evaluation does not recurse per operand.
  const std::string all = chain(".n == 1", " and .n == 1", 999);
  EXPECT_TRUE(match(all.c_str(), R"({"n": 1})"));
  EXPECT_FALSE(match((all + " and .n == 2").c_str(), R"({"n": 1})"));
  const std::string any = chain(".n == 2", " || .n == 2", 998) + " || .n == 1";
  EXPECT_TRUE(match(any.c_str(), R"({"n": 1})"));
  EXPECT_FALSE(match(any.c_str(), R"({"n": 3})"));
  // Mixed and/or keeps precedence: `a or b and c` is `a or (b and c)`.
  EXPECT_TRUE(match(".n == 1 or .n == 2 and .n == 3 and .n == 4", R"({"n": 1})"));
  EXPECT_FALSE(match("(.n == 1 or .n == 2) and .n == 3 and .n == 4", R"({"n": 1})"));
}

TEST(Filter, RefusesMoreNodesThanTheLimit) {
  // The chain from issue 19 (50,000 `and`s) used to overflow the stack.
  const std::string huge = chain(".n == 1", " and .n == 1", 50000);
  const std::string err = parse_error(huge);
  EXPECT_NE(err.find("more than 4096 operands and operators"), std::string::npos) << err;
  std::string items = "[0";
  for (int i = 1; i < 4093; ++i) items += "," + std::to_string(i);  // 4093 items + .n, in, [] = 4096
  EXPECT_TRUE(match((".n in " + items + "]").c_str(), R"({"n": 4000})"));
  EXPECT_NE(parse_error(".n in " + items + ",1,2]").find("4096"), std::string::npos);
}

TEST(Filter, RefusesTreesDeeperThanTheLimit) {
  EXPECT_TRUE(match(chain("0", " + 1", 150).append(" == 150").c_str(), "{}"));
  for (const std::string& deep : {chain("0", " + 1", 300), chain("1", " ** 1", 300), chain("1", " - 1", 100000),
                                  chain("", "not ", 300) + "1", chain("", "-", 100000) + "1",
                                  chain("", "[", 300), std::string(100000, '(') + "1"}) {
    const std::string err = parse_error(deep);
    EXPECT_TRUE(err.find("200 levels deep") != std::string::npos || err.find("nested too deeply") != std::string::npos)
        << err.substr(0, 200);
  }
}

TEST(Filter, RefusesOverlongNumbersAndShortensQuotedTokens) {
  EXPECT_NE(parse_error("1" + std::string(1000, '0')).find("number longer than 128"), std::string::npos);
  EXPECT_TRUE(match(("1" + std::string(100, '0') + " > 1").c_str(), "{}"));
  const std::string err = parse_error(".a == 1 '" + std::string(100000, 'x') + "'");
  EXPECT_LT(err.size(), 200u) << err.substr(0, 200);
}

TEST(Filter, DeeplyNestedAttributesDoNotMatch) {
  const std::string nested = R"({"a": )" + std::string(5000, '[') + "1" + std::string(5000, ']') + "}";
  EXPECT_FALSE(match(".a == 1", nested.c_str()));
  EXPECT_FALSE(match("1 in .a", nested.c_str()));
  EXPECT_TRUE(match(".a == [[1]]", R"({"a": [[1]]})"));
}

TEST(Filter, StringLiteralsTakeJsonEscapesInBothQuoteStyles) {
  const char* j = R"({"s": "a\nb", "q": "say \"hi\" 'yo'", "t": "tab\there\\", "u": "\u00e9\u20ac\ud83d\ude00/"})";
  for (const char* e : {R"(.s == "a\nb")", R"(.s == 'a\nb')", R"(.q == "say \"hi\" 'yo'")",
                        R"(.q == 'say "hi" \'yo\'')", R"(.t == "tab\there\\")", R"(.u == "\u00e9\u20AC\uD83D\uDE00\/")",
                        R"(.u == "é€😀/")", R"("\b\f\r" == "\u0008\u000c\u000D")"}) {
    EXPECT_TRUE(match(e, j)) << e;
  }
  EXPECT_FALSE(match(R"(.s == "anb")", j));  // the issue: \n was read as n
  EXPECT_TRUE(match(R"("\u0000" in "x\u0000y")", R"({})"));
  EXPECT_EQ(Filter::parse(R"("a\u0000b" == .z)").matches(std::string_view(R"({"z": "a\u0000b"})")), true);
}

TEST(Filter, BadEscapesAreParseErrorsNamingThem) {
  const std::pair<const char*, const char*> bad[] = {
      {R"(.s == "a\qb")", "invalid escape '\\q'"},        {R"(.s == "\x41")", "invalid escape '\\x'"},
      {R"(.s == "\u12")", "four hex digits"},             {R"(.s == "\u12G4")", "four hex digits"},
      {R"(.s == "\uDE00")", "lone low surrogate"},        {R"(.s == "\uD83D")", "without its low surrogate"},
      {R"(.s == "\uD83Dx")", "without its low surrogate"}, {R"(.s == "\uD83D\u0041")", "not a low surrogate"},
      {R"(.s == "abc\)", "unterminated string"}};
  for (const auto& [expr, why] : bad) {
    const std::string err = parse_error(expr);
    EXPECT_NE(err.find(why), std::string::npos) << expr << " → " << err;
    EXPECT_NE(err.find("offset"), std::string::npos) << err;
  }
  EXPECT_NE(parse_error(R"(.s == "ab\q")").find("offset 9"), std::string::npos) << parse_error(R"(.s == "ab\q")");
}

namespace {
using infer::vector::FilterBudget;
using infer::vector::FilterLimitError;
}  // namespace

// The issue's operands: a 1,001-byte attribute searched for in a 20,000-byte literal. A quadratic search
// takes ~20M steps per term; the linear one ~21K bytes, charged as such.
TEST(Filter, SubstringSearchIsLinearAndCharged) {
  const std::string attr = R"({"s": ")" + std::string(1000, 'a') + "b" + R"("})";
  std::string expr = ".s in \"" + std::string(20000, 'a') + "\"";
  for (int i = 0; i < 9; ++i) expr += " or .s in \"" + std::string(20000, 'a') + "\"";
  const Filter f = Filter::parse(expr);
  FilterBudget budget(UINT64_MAX);
  EXPECT_FALSE(f.matches(attr, &budget));
  const uint64_t per_element = budget.used();
  EXPECT_GT(per_element, 10u * 21000 * infer::vector::kFilterSearchByteUnits);
  EXPECT_LT(per_element, 10u * 21000 * infer::vector::kFilterSearchByteUnits + 4 * 1024 * 16);
  // The estimate is of the same order as the charge.
  EXPECT_GE(f.estimate_units(attr.size()), per_element / 2);
  EXPECT_LE(f.estimate_units(attr.size()), per_element * 2);
  // A match still matches: the needle at the end of a long haystack, and in the middle.
  const std::string hay = std::string(20000, 'a') + "b";
  EXPECT_TRUE(Filter::parse(".s in \"" + hay + "\"").matches(attr));
  EXPECT_TRUE(Filter::parse("\"aab\" in .s").matches(attr));
  EXPECT_FALSE(Filter::parse("\"ba\" in .s").matches(attr));
  EXPECT_TRUE(Filter::parse("\"\" in .s").matches(attr));
}

TEST(Filter, BudgetStopsEvaluationPastItsLimit) {
  const Filter f = Filter::parse(R"(.s == "x" or "abc" in .s)");
  const std::string attr = R"({"s": "zzabczz"})";
  FilterBudget budget(10000);
  int evaluated = 0;
  try {
    for (;; ++evaluated) ASSERT_TRUE(f.matches(attr, &budget));
  } catch (const FilterLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("FILTER work limit exceeded"), std::string::npos) << e.what();
  }
  EXPECT_GT(evaluated, 5);
  EXPECT_LT(evaluated, 100);
  EXPECT_GT(budget.used(), budget.limit());
  // Without a budget nothing is counted or refused.
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(f.matches(attr));
}
