// GBNF grammars (llama.cpp's grammar format, as its grammars/README.md documents it), parsed into an
// immutable Grammar that the recogniser (recognizer.h) and the token masks (token_mask.h) run over.
//
// Syntax: rules `name ::= alternatives`, one per line (a rule continues on the next line after `::=`,
// after `|` and inside parentheses); alternatives separated by `|`; sequences of string literals
// ("..." with escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH), character classes (`[a-z]`,
// `[^...]`, with the same escapes), `.` (any character), rule names, parenthesised groups, and the
// postfix operators `*` `+` `?` `{m}` `{m,}` `{m,n}` `{,n}`; `#` starts a comment to the end of the line.
// Rule names are letters, digits, `-` and `_`; a rule defined twice keeps its last definition (as
// llama.cpp). The language is the one of the rule `root`, over Unicode code points.
//
// Thread-safety: a Grammar is immutable; all its const methods may run concurrently.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace infer::grammar {

// A grammar that cannot be used: what() is "line L, column C: <what is wrong>" (1-based; the column
// counts bytes) for a syntax error, an undefined rule (named), a missing `root` rule, a bad escape, a
// bad repetition count (above 2000, or a maximum below the minimum), left recursion (the rule named),
// which the recogniser cannot run, groups nested deeper than 256, or a chain of more than 1000 rules
// each starting the one before (limits that keep any text from exhausting a thread's stack).
struct GrammarError : std::runtime_error {
  GrammarError(int line, int column, const std::string& what);
  int line, column;
};

// One element of an alternative, in a flat array: an alternative is a run of elements ended by End.
struct Element {
  enum class Kind : uint8_t { End, Chars, Rule } kind = Kind::End;
  bool negated = false;      // Chars: matches the code points outside the ranges
  uint32_t rule = 0;         // Rule: the referenced rule's index
  uint32_t ranges_begin = 0; // Chars: [ranges_begin, ranges_end) in Grammar::ranges()
  uint32_t ranges_end = 0;
};

struct CharRange {
  uint32_t lo, hi;  // inclusive code points
};

class Grammar {
 public:
  // Element positions (indexes into elements()) where each alternative of `rule` starts.
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rules_[rule]; }
  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<CharRange>& ranges() const { return ranges_; }
  uint32_t root() const { return root_; }
  size_t n_rules() const { return rules_.size(); }
  // The rule's name; rules made from groups and repetitions are named after their rule ("value-3").
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }

  // Whether the Chars element at `pos` matches code point `cp`.
  bool matches(uint32_t pos, uint32_t cp) const {
    if (cp < 128) return (ascii_[pos][cp >> 6] >> (cp & 63)) & 1;
    return matches_slow(pos, cp);
  }
  // Whether the Chars element at `pos` matches some code point in [lo, hi]; every one of them.
  bool matches_some(uint32_t pos, uint32_t lo, uint32_t hi) const;
  bool matches_all(uint32_t pos, uint32_t lo, uint32_t hi) const;

 private:
  friend class GrammarBuilder;
  bool matches_slow(uint32_t pos, uint32_t cp) const;
  bool ranges_cover(const Element& e, uint32_t lo, uint32_t hi) const;  // e's ranges hold all of [lo, hi]
  bool ranges_meet(const Element& e, uint32_t lo, uint32_t hi) const;   // e's ranges hold some of it

  std::vector<std::vector<uint32_t>> rules_;
  std::vector<std::string> names_;
  std::vector<Element> elements_;
  std::vector<CharRange> ranges_;
  std::vector<std::array<uint64_t, 2>> ascii_;  // per element: the ASCII code points a Chars element matches
  uint32_t root_ = 0;
};

// Parses GBNF `text`; throws GrammarError.
std::shared_ptr<const Grammar> parse_gbnf(std::string_view text);

// Whether the whole of `utf8_text` is a sentence of `g`'s language (false for invalid UTF-8).
bool grammar_accepts(const Grammar& g, std::string_view utf8_text);

// GBNF for any JSON value (RFC 8259: objects, arrays, strings with escapes, numbers, true/false/null),
// with optional whitespace between tokens limited so that generation cannot run on in blank space.
const std::string& json_value_gbnf();

}  // namespace infer::grammar
