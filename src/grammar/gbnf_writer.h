// Building blocks for writing GBNF text (llama.cpp's grammar format): quoted literals, character classes,
// sequences, alternatives and bounded repetition that parenthesise only where needed, and a rule set that
// hands out unique rule names. Used by the JSON Schema converter and the pattern converter.
// Thread-safety: pure functions; a GbnfRules is used by one thread.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace infer::grammar {

// Inclusive range of Unicode code points.
struct CodePointRange {
  uint32_t lo;
  uint32_t hi;
};

// `"text"`, escaping quotes, backslashes and control bytes; UTF-8 is kept as is.
std::string gbnf_literal(std::string_view utf8);
// `[...]` or `[^...]` over the ranges; every byte that is not a letter or digit is written as an escape.
std::string gbnf_class(const std::vector<CodePointRange>& ranges, bool negated);

// Whether `expr` is a single term (a rule name, literal, class or parenthesised group, no postfix operator),
// so that an operator can follow it without parentheses.
bool gbnf_is_term(std::string_view expr);
// Concatenation; empty parts ("", the empty sequence) are skipped.
std::string gbnf_seq(const std::vector<std::string>& parts);
// Alternatives; an empty alternative makes the rest optional. Empty for no alternatives at all.
std::string gbnf_alt(const std::vector<std::string>& alternatives);
// `expr` repeated min..max times (max nullopt = unbounded), written with ? * + {m} {m,} {m,n}.
std::string gbnf_repeat(const std::string& expr, uint64_t min, std::optional<uint64_t> max);

// Rules in the order they were first named; names are [a-z0-9-] and unique.
class GbnfRules {
 public:
  // A fresh name built from `hint` (reserved; give it a body with define()).
  std::string reserve(std::string_view hint);
  void define(const std::string& name, std::string body);
  // reserve() + define().
  std::string add(std::string_view hint, std::string body);
  // Whether `name` has been reserved.
  bool has(const std::string& name) const;
  // "name ::= body\n" for every rule, `root` (when defined) first.
  std::string text() const;

 private:
  std::vector<std::pair<std::string, std::string>> rules_;
  std::unordered_map<std::string, size_t> index_;        // name → position in rules_
  std::unordered_map<std::string, unsigned> next_suffix_;  // base name → the next "-N" to try
};

}  // namespace infer::grammar
