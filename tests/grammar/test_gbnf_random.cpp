// The recogniser against std::regex on random strings, for grammars that have a regular equivalent, and
// the parser on random and mutated texts: a grammar parses or throws GrammarError, nothing else.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>

#include "grammar/gbnf.h"

namespace infer::grammar {
namespace {

struct Pair {
  const char* gbnf;
  const char* regex;
  const char* alphabet;
};

const Pair kPairs[] = {
    {R"g(root ::= [ab]* "c" [a-c]?)g", "[ab]*c[a-c]?", "abcd"},
    {R"g(root ::= ("ab" | "a" | "bb")+)g", "(ab|a|bb)+", "ab"},
    {R"g(root ::= "x"{2,4} ("y" | "z"){0,2})g", "x{2,4}(y|z){0,2}", "xyz"},
    {R"g(root ::= [^a]{1,3} a?
a ::= "a" [0-9]*)g", "[^a]{1,3}(a[0-9]*)?", "ab01"},
    {R"g(root ::= (num ("+" | "-"))* num
num ::= "0" | [1-9] [0-9]*)g", "((0|[1-9][0-9]*)(\\+|-))*(0|[1-9][0-9]*)", "012+-"},
    {R"g(root ::= ( "(" inner ")" )? "!"
inner ::= [a-b]+ | "")g", "(\\(([a-b]+|)\\))?!", "ab()!"},
    {R"g(root ::= e
e ::= t ("|" t)*
t ::= [ab] "*"?)g", "[ab]\\*?(\\|[ab]\\*?)*", "ab*|"},
};

TEST(GbnfRandom, AgreesWithRegexOnRandomStrings) {
  std::mt19937 rng(11);
  for (const Pair& p : kPairs) {
    SCOPED_TRACE(p.gbnf);
    const auto g = parse_gbnf(p.gbnf);
    const std::regex re(p.regex);
    const std::string alphabet = p.alphabet;
    int accepted = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const int len = std::uniform_int_distribution<int>(0, 9)(rng);
      for (int k = 0; k < len; ++k) s += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      const bool want = std::regex_match(s, re);
      accepted += want;
      EXPECT_EQ(grammar_accepts(*g, s), want) << "\"" << s << "\"";
    }
    EXPECT_GT(accepted, 0);
  }
}

TEST(GbnfRandom, ParserThrowsOnlyGrammarErrorOnMutatedTexts) {
  const std::string base = json_value_gbnf();
  const std::string noise = "()[]{}|*+?.\"\\#:=\n ,-^0a9xuU";
  std::mt19937 rng(5);
  int parsed = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string t = base;
    const int edits = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int e = 0; e < edits; ++e) {
      const size_t at = std::uniform_int_distribution<size_t>(0, t.size())(rng);
      switch (rng() % 3) {
        case 0: t.insert(at, 1, noise[rng() % noise.size()]); break;
        case 1: if (at < t.size()) t.erase(at, 1); break;
        default: if (at < t.size()) t[at] = char(rng() % 256); break;
      }
    }
    try {
      const auto g = parse_gbnf(t);
      ++parsed;
      grammar_accepts(*g, "{\"a\": [1, 2]}");
    } catch (const GrammarError&) {
    }
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace infer::grammar
