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
  try {
    Filter::parse(".a == 1 )");
  } catch (const FilterError& e) {
    EXPECT_NE(std::string(e.what()).find("offset 8"), std::string::npos) << e.what();
  }
}
