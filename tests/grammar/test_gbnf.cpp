// GBNF parsing (what is accepted, errors with their positions) and the recogniser on whole texts.
#include <gtest/gtest.h>

#include <string>

#include "grammar/gbnf.h"

namespace infer::grammar {
namespace {

bool accepts(const std::string& gbnf, const std::string& text) { return grammar_accepts(*parse_gbnf(gbnf), text); }

// The error's message, "" when the grammar parses.
std::string error_of(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

const char* kArithmetic = R"g(
root  ::= expr
expr  ::= term ([-+*/] term)*
term  ::= num | "(" expr ")"
num   ::= [0-9]+
)g";

const char* kList = R"(# a bulleted list of one to five items
root ::= item{1,5}
item ::= "- " [a-z ]{1,20} "\n"
)";

TEST(Gbnf, LiteralsAndAlternatives) {
  EXPECT_TRUE(accepts(R"(root ::= "yes" | "no")", "yes"));
  EXPECT_TRUE(accepts(R"(root ::= "yes" | "no")", "no"));
  EXPECT_FALSE(accepts(R"(root ::= "yes" | "no")", "ye"));
  EXPECT_FALSE(accepts(R"(root ::= "yes" | "no")", "yess"));
  EXPECT_FALSE(accepts(R"(root ::= "yes" | "no")", ""));
}

TEST(Gbnf, EscapesInLiteralsAndClasses) {
  EXPECT_TRUE(accepts(R"(root ::= "a\nb\t\"\\\x41\u00e9\U0001F600")", "a\nb\t\"\\A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(accepts(R"(root ::= [\x30-\x39\]\-]+)", "09]-"));
  EXPECT_TRUE(accepts(R"(root ::= "é" [α-ω])", "\xC3\xA9\xCE\xB2"));  // literal UTF-8 in the grammar
}

TEST(Gbnf, ClassesNegationAndAnyChar) {
  EXPECT_TRUE(accepts(R"(root ::= [a-c]+)", "abcab"));
  EXPECT_FALSE(accepts(R"(root ::= [a-c]+)", "abd"));
  EXPECT_TRUE(accepts(R"(root ::= [^"]*)", "x y \xE6\x97\xA5"));
  EXPECT_FALSE(accepts(R"(root ::= [^"]*)", "a\"b"));
  EXPECT_TRUE(accepts(R"(root ::= . . .)", "a\xE6\x97\xA5z"));
  EXPECT_FALSE(accepts(R"(root ::= . .)", "abc"));
}

TEST(Gbnf, Repetitions) {
  const std::string g = R"(root ::= "a"{2} "b"{1,3} "c"{2,} "d"{,2} "e"?)";
  EXPECT_TRUE(accepts(g, "aabcc"));
  EXPECT_TRUE(accepts(g, "aabbbccccdde"));
  EXPECT_FALSE(accepts(g, "abcc"));
  EXPECT_FALSE(accepts(g, "aabbbbcc"));
  EXPECT_FALSE(accepts(g, "aabc"));
  EXPECT_FALSE(accepts(g, "aabccddd"));
  EXPECT_TRUE(accepts(R"(root ::= "ab"+)", "ababab"));  // a literal repeats whole
  EXPECT_FALSE(accepts(R"(root ::= "ab"+)", "aba"));
  EXPECT_TRUE(accepts(R"(root ::= ("x" | "yz")*)", ""));
  EXPECT_TRUE(accepts(R"(root ::= ("x" | "yz")*)", "xyzx"));
}

TEST(Gbnf, NewlinesInsideGroupsAndAfterBarsAndComments) {
  const std::string g = "root ::= (\n  \"a\" # first\n  \"b\"\n) |\n  \"c\"  # or c\n# comment line\nother ::= \"z\"\n";
  EXPECT_TRUE(accepts(g, "ab"));
  EXPECT_TRUE(accepts(g, "c"));
  EXPECT_FALSE(accepts(g, "z"));
}

TEST(Gbnf, ArithmeticGrammar) {
  EXPECT_TRUE(accepts(kArithmetic, "1+2*(3-40)/5"));
  EXPECT_TRUE(accepts(kArithmetic, "((7))"));
  EXPECT_FALSE(accepts(kArithmetic, "1+"));
  EXPECT_FALSE(accepts(kArithmetic, "(1"));
  EXPECT_FALSE(accepts(kArithmetic, "1++2"));
}

TEST(Gbnf, ListGrammar) {
  EXPECT_TRUE(accepts(kList, "- eggs\n- milk and tea\n"));
  EXPECT_FALSE(accepts(kList, "- eggs"));
  EXPECT_FALSE(accepts(kList, "- a\n- b\n- c\n- d\n- e\n- f\n"));
}

TEST(Gbnf, JsonValueGrammar) {
  const std::string& g = json_value_gbnf();
  for (const char* ok : {R"({"a": [1, 2.5, -3e10, true, false, null], "b": {"c": "d\n\u00e9"}})", "[]", "{}", "0",
                         "\"\"", R"("caf\u00e9 \"q\" \\ \/")", "-0.5E+3", "[\n  1,\n  {\"x\" : \"y\"}\n]",
                         "\"\xE6\x97\xA5\xE6\x9C\xAC\""})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"{", "[1,]", "{\"a\"}", "01", "1.", "\"\\x\"", "tru", " 1", "1 ", "{'a': 1}",
                          "\"a\nb\"", "[1 2]", "{\"a\":1,}"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(Gbnf, RejectsInvalidUtf8Text) {
  EXPECT_FALSE(accepts(R"(root ::= [^x]*)", "a\xC3"));
  EXPECT_FALSE(accepts(R"(root ::= [^x]*)", "a\x80"));
  EXPECT_FALSE(accepts(R"(root ::= "[")", "\xF0\x80\x81\x9B"));  // overlong '['
  EXPECT_FALSE(accepts(R"(root ::= "[")", "\xC1\x9B"));
  EXPECT_FALSE(accepts(R"(root ::= [^x]*)", "\xED\xA0\x80"));     // a surrogate
  EXPECT_FALSE(accepts(R"(root ::= [^x]*)", "\xF4\x90\x80\x80")); // above U+10FFFF
  EXPECT_TRUE(accepts(R"(root ::= [^x]*)", "\xF4\x8F\xBF\xBF\xED\x9F\xBF\xE0\xA0\x80"));
}

TEST(Gbnf, LastDefinitionOfARuleWins) {
  EXPECT_TRUE(accepts("root ::= a\na ::= \"1\"\na ::= \"2\"\n", "2"));
  EXPECT_FALSE(accepts("root ::= a\na ::= \"1\"\na ::= \"2\"\n", "1"));
}

TEST(GbnfErrors, UndefinedRuleIsNamedAtItsUse) {
  EXPECT_EQ(error_of("root ::= \"a\" thing\n"), "line 1, column 14: undefined rule 'thing'");
  EXPECT_EQ(error_of("root ::= x\nx ::= \"b\" (y | \"c\")\n"), "line 2, column 12: undefined rule 'y'");
}

TEST(GbnfErrors, MissingRoot) {
  EXPECT_EQ(error_of("start ::= \"a\"\n"), "line 1, column 1: the grammar has no rule named 'root'");
  EXPECT_EQ(error_of(""), "line 1, column 1: the grammar has no rule named 'root'");
}

TEST(GbnfErrors, BadEscape) {
  EXPECT_EQ(error_of(R"(root ::= "a\qb")"), "line 1, column 12: unknown escape '\\q'");
  EXPECT_EQ(error_of(R"(root ::= "\x4")"), "line 1, column 14: expected 2 hex digits in the escape");
  EXPECT_EQ(error_of(R"(root ::= "\U00110000")"), "line 1, column 21: escape names a code point above U+10FFFF");
}

TEST(GbnfErrors, SyntaxErrorsWithPositions) {
  EXPECT_EQ(error_of("root ::= \"a"), "line 1, column 12: unterminated string literal");
  EXPECT_EQ(error_of("root ::= [a-z"), "line 1, column 14: unterminated character class");
  EXPECT_EQ(error_of("root ::= (\"a\""), "line 1, column 14: expected ')'");
  EXPECT_EQ(error_of("root = \"a\""), "line 1, column 6: expected '::=' after the rule name 'root'");
  EXPECT_EQ(error_of("root ::= * \"a\""), "line 1, column 10: '*' has nothing before it to repeat");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}"), "line 1, column 18: repetition maximum is below its minimum");
  EXPECT_EQ(error_of("root ::= \"a\"{2001}"), "line 1, column 14: repetition count above 2000");
  EXPECT_EQ(error_of("root ::= \"a\" )"), "line 1, column 14: expected the end of the line after rule 'root'");
  EXPECT_EQ(error_of("root ::= [z-a]"), "line 1, column 14: character range is backwards");
  EXPECT_EQ(error_of("root ::= \"a\"\n\n  ::= \"b\""), "line 3, column 3: expected a rule name");
}

TEST(GbnfErrors, NestingThatCouldExhaustTheStackIsRefused) {
  EXPECT_EQ(error_of("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')')),
            "line 1, column 266: groups nested deeper than 256");
  EXPECT_EQ(error_of("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')')), "");
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 1200; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
  chain += "r1200 ::= \"y\"\n";
  EXPECT_NE(error_of(chain).find("starts a chain of more than 1000 rules before any character"), std::string::npos);
}

TEST(GbnfErrors, LeftRecursionIsRefusedNamingTheRule) {
  EXPECT_EQ(error_of("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n"),
            "line 2, column 1: rule 'expr' is left-recursive (it can reach itself before any character), which is "
            "not supported: rewrite it with repetition");
  // Through a rule that may be empty.
  EXPECT_NE(error_of("root ::= opt root \"x\" | \"y\"\nopt ::= \"a\"?\n").find("rule 'root' is left-recursive"),
            std::string::npos);
  // Right recursion is fine.
  EXPECT_TRUE(accepts("root ::= \"1\" (\"+\" root)?\n", "1+1+1"));
}

}  // namespace
}  // namespace infer::grammar
