// Pattern → GBNF by recursive descent: each construct is written as GBNF text as it is parsed. Character
// sets are kept as code point ranges so that `"`, `\` and control characters can be written the way JSON
// escapes them. Shorthands and negated classes that Python's `re` (the usual validator) reads as Unicode
// categories (\D, \W, \S, [^\d]) are generated as their printable-ASCII members only, a subset that every
// reading of the class accepts.
#include "grammar/string_pattern.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <vector>

#include "grammar/gbnf_writer.h"
#include "tokenizer/utf8.h"

namespace infer::grammar {
namespace {

constexpr uint64_t kMaxRepeat = 10000;
constexpr int kMaxGroupDepth = 64;  // the parser recurses per group

struct CharSet {
  std::vector<CodePointRange> ranges;  // sorted, disjoint after normalise()
  bool negated = false;                // everything except `ranges`

  void add(uint32_t lo, uint32_t hi) { ranges.push_back({lo, hi}); }
  void add(const CharSet& other) { ranges.insert(ranges.end(), other.ranges.begin(), other.ranges.end()); }
  bool contains(uint32_t c) const {
    return std::any_of(ranges.begin(), ranges.end(), [c](const auto& r) { return r.lo <= c && c <= r.hi; });
  }
  void normalise() {
    std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
    std::vector<CodePointRange> merged;
    for (const auto& r : ranges) {
      if (!merged.empty() && r.lo <= merged.back().hi + 1) {
        merged.back().hi = std::max(merged.back().hi, r.hi);
      } else {
        merged.push_back(r);
      }
    }
    ranges = std::move(merged);
  }
};

CharSet digits() { return {{{'0', '9'}}, false}; }
CharSet word_chars() { return {{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}, false}; }
CharSet space_chars() { return {{{'\t', '\r'}, {' ', ' '}}, false}; }

// Printable ASCII minus `set`.
CharSet ascii_complement(CharSet set) {
  set.normalise();
  CharSet out;
  for (uint32_t c = 0x20; c <= 0x7E; ++c)
    if (!set.contains(c)) out.add(c, c);
  out.normalise();
  return out;
}

// How a code point is written inside a JSON string.
std::string json_escaped(uint32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (c < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", c);
    return buf;
  }
  return tokenizer::utf8::encode(c);
}

bool needs_json_escape(uint32_t c) { return c < 0x20 || c == '"' || c == '\\'; }

// GBNF for one JSON string character from `set`.
std::string charset_gbnf(CharSet set) {
  set.normalise();
  std::vector<std::string> alts;
  if (set.negated) {
    CharSet excluded = set;
    excluded.add(0, 0x1F);
    excluded.add('"', '"');
    excluded.add('\\', '\\');
    excluded.normalise();
    alts.push_back(gbnf_class(excluded.ranges, true));
    if (!set.contains('"')) alts.push_back(gbnf_literal("\\\""));
    if (!set.contains('\\')) alts.push_back(gbnf_literal("\\\\"));
    return gbnf_alt(alts);
  }
  CharSet raw;
  for (const auto& r : set.ranges) {
    uint32_t lo = r.lo;
    for (uint32_t c = r.lo; c <= r.hi && c <= 0x5C; ++c) {
      if (needs_json_escape(c)) {
        if (c > lo) raw.add(lo, c - 1);
        alts.push_back(gbnf_literal(json_escaped(c)));
        lo = c + 1;
      }
    }
    if (lo <= r.hi) raw.add(lo, r.hi);
  }
  if (raw.ranges.size() == 1 && raw.ranges[0].lo == raw.ranges[0].hi) {
    alts.insert(alts.begin(), gbnf_literal(json_escaped(raw.ranges[0].lo)));
  } else if (!raw.ranges.empty()) {
    alts.insert(alts.begin(), gbnf_class(raw.ranges, false));
  }
  if (alts.empty()) throw std::invalid_argument("empty character class");
  return gbnf_alt(alts);
}

class PatternParser {
 public:
  PatternParser(std::string_view pattern, const std::string& any_char)
      : p_(pattern), any_(gbnf_repeat(any_char, 0, std::nullopt)) {}

  std::string run() {
    std::vector<std::string> alts;
    while (true) {
      bool start = false, end = false;
      std::string body = sequence(true, &start, &end);
      alts.push_back(gbnf_seq({start ? "" : any_, body, end ? "" : any_}));
      if (at_end()) break;
      if (peek() == ')') fail("unbalanced ')'");
      ++i_;  // '|'
    }
    std::string out = gbnf_alt(alts);
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(what + " at offset " + std::to_string(i_));
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    throw std::invalid_argument("unsupported " + what + " at offset " + std::to_string(i_));
  }
  bool at_end() const { return i_ >= p_.size(); }
  char peek(size_t ahead = 0) const { return i_ + ahead < p_.size() ? p_[i_ + ahead] : '\0'; }

  uint32_t next_code_point() {
    const auto b0 = static_cast<unsigned char>(p_[i_]);
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (len == 0 || i_ + len > p_.size()) fail("invalid UTF-8");
    uint32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(p_[i_ + k]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
      c = (c << 6) | (b & 0x3F);
    }
    i_ += len;
    return c;
  }

  uint32_t hex_digits(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char c = peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail("bad hex escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    return v;
  }

  // After a backslash: a single code point (returned) or a shorthand class (in *set).
  std::optional<uint32_t> escape(bool in_class, CharSet* set) {
    if (at_end()) fail("pattern ends with a backslash");
    const char c = peek();
    switch (c) {
      case 'd': ++i_; *set = digits(); return std::nullopt;
      case 'w': ++i_; *set = word_chars(); return std::nullopt;
      case 's': ++i_; *set = space_chars(); return std::nullopt;
      case 'D': ++i_; *set = ascii_complement(digits()); return std::nullopt;
      case 'W': ++i_; *set = ascii_complement(word_chars()); return std::nullopt;
      case 'S': ++i_; *set = ascii_complement(space_chars()); return std::nullopt;
      case 'n': ++i_; return '\n';
      case 't': ++i_; return '\t';
      case 'r': ++i_; return '\r';
      case 'f': ++i_; return '\f';
      case 'v': ++i_; return '\v';
      case 'x': ++i_; return hex_digits(2);
      case 'u': {
        ++i_;
        const uint32_t v = hex_digits(4);
        if (v >= 0xD800 && v <= 0xDFFF) fail("surrogate escape");
        return v;
      }
      case 'b':
        if (in_class) {
          ++i_;
          return '\b';
        }
        unsupported("word boundary \\b");
      case 'B': unsupported("word boundary \\B");
      case 'A': case 'Z': case 'z': case 'G': unsupported(std::string("anchor \\") + c);
      case 'p': case 'P': unsupported(std::string("Unicode property \\") + c);
      case 'k': unsupported("backreference \\k");
      default: break;
    }
    if (c >= '0' && c <= '9') unsupported(std::string("backreference or octal escape \\") + c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) unsupported(std::string("escape \\") + c);
    return next_code_point();
  }

  CharSet bracket_class() {
    CharSet set;
    if (peek() == '^') {
      set.negated = true;
      ++i_;
    }
    bool has_shorthand = false;
    bool first = true;
    while (true) {
      if (at_end()) fail("unterminated character class");
      if (peek() == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      CharSet shorthand;
      std::optional<uint32_t> lo;
      if (peek() == '\\') {
        ++i_;
        lo = escape(true, &shorthand);
      } else if (peek() == '[' && (peek(1) == ':' || peek(1) == '=' || peek(1) == '.')) {
        unsupported("POSIX class [:...:]");
      } else {
        lo = next_code_point();
      }
      if (!lo) {
        has_shorthand = true;
        set.add(shorthand);
        continue;
      }
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        ++i_;
        std::optional<uint32_t> hi;
        if (peek() == '\\') {
          ++i_;
          hi = escape(true, &shorthand);
          if (!hi) fail("shorthand class as a range end");
        } else {
          hi = next_code_point();
        }
        if (*hi < *lo) fail("range out of order");
        set.add(*lo, *hi);
      } else {
        set.add(*lo, *lo);
      }
    }
    if (set.negated && has_shorthand) {
      set.negated = false;
      return ascii_complement(set);
    }
    if (!set.negated && set.ranges.empty()) fail("empty character class");
    return set;
  }

  uint64_t number() {
    uint64_t v = 0;
    const size_t start = i_;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > kMaxRepeat) fail("repetition count over " + std::to_string(kMaxRepeat));
      ++i_;
    }
    if (i_ == start) fail("bad repetition count");
    return v;
  }

  // A quantifier after an atom, if any: (min, max).
  std::optional<std::pair<uint64_t, std::optional<uint64_t>>> quantifier() {
    std::pair<uint64_t, std::optional<uint64_t>> q;
    const char c = peek();
    if (c == '*') {
      q = {0, std::nullopt};
      ++i_;
    } else if (c == '+') {
      q = {1, std::nullopt};
      ++i_;
    } else if (c == '?') {
      q = {0, 1};
      ++i_;
    } else if (c == '{') {
      ++i_;
      const uint64_t lo = peek() == ',' ? 0 : number();
      q = {lo, lo};
      if (peek() == ',') {
        ++i_;
        if (peek() == '}') {
          q.second.reset();
        } else {
          q.second = number();
        }
      }
      if (peek() != '}') fail("'{' that is not a repetition {m}, {m,} or {m,n}");
      ++i_;
      if (q.second && *q.second < lo) fail("repetition {m,n} with n < m");
    } else {
      return std::nullopt;
    }
    if (peek() == '?') {
      ++i_;  // lazy: the same strings match
    } else if (peek() == '+') {
      unsupported("possessive quantifier");
    }
    return q;
  }

  std::string group() {
    if (++group_depth_ > kMaxGroupDepth) unsupported("nesting of groups deeper than " + std::to_string(kMaxGroupDepth));
    if (peek() == '?') {
      const char k = peek(1);
      if (k == ':') {
        i_ += 2;
      } else if ((k == 'P' && peek(2) == '<') || (k == '<' && peek(2) != '=' && peek(2) != '!')) {
        i_ += k == 'P' ? 3 : 2;
        while (!at_end() && peek() != '>') ++i_;
        if (at_end()) fail("unterminated group name");
        ++i_;
      } else if (k == '=' || k == '!') {
        unsupported("lookahead (?" + std::string(1, k));
      } else if (k == '<') {
        unsupported("lookbehind (?<" + std::string(1, peek(2)));
      } else if (k == 'P' && peek(2) == '=') {
        unsupported("backreference (?P=");
      } else {
        unsupported("group or flags (?" + std::string(1, k));
      }
    }
    std::vector<std::string> alts;
    while (true) {
      alts.push_back(sequence(false, nullptr, nullptr));
      if (at_end()) fail("unterminated group");
      if (peek() == ')') {
        ++i_;
        break;
      }
      ++i_;  // '|'
    }
    --group_depth_;
    std::string out = gbnf_alt(alts);
    return out.empty() || gbnf_is_term(out) ? out : "(" + out + ")";
  }

  // Atoms up to '|', ')' or the end. At the top level, ^ may open it and $ close it.
  std::string sequence(bool top, bool* anchored_start, bool* anchored_end) {
    std::vector<std::string> parts;
    std::string pending;  // JSON-escaped literal text not yet written
    auto flush = [&] {
      if (!pending.empty()) parts.push_back(gbnf_literal(pending));
      pending.clear();
    };
    bool first = true;
    while (!at_end() && peek() != '|' && peek() != ')') {
      const char c = peek();
      if (c == '^') {
        if (!top || !first) unsupported("anchor ^ inside the pattern");
        *anchored_start = true;
        ++i_;
        first = false;
        continue;
      }
      first = false;
      if (c == '$') {
        ++i_;
        if (!top || !(at_end() || peek() == '|')) {
          --i_;
          unsupported("anchor $ inside the pattern");
        }
        *anchored_end = true;
        continue;
      }
      std::string atom;
      std::optional<uint32_t> literal;
      if (c == '*' || c == '+' || c == '?' || (c == '{' && peek(1) >= '0' && peek(1) <= '9')) fail("nothing to repeat");
      if (c == '(') {
        ++i_;
        atom = group();
      } else if (c == '[') {
        ++i_;
        atom = charset_gbnf(bracket_class());
      } else if (c == '.') {
        ++i_;
        CharSet not_newline{{{'\n', '\n'}}, true};
        atom = charset_gbnf(not_newline);
      } else if (c == '\\') {
        ++i_;
        CharSet shorthand;
        literal = escape(false, &shorthand);
        if (!literal) atom = charset_gbnf(shorthand);
      } else {
        literal = next_code_point();
      }
      const auto q = quantifier();
      if (literal && !q) {
        pending += json_escaped(*literal);
        continue;
      }
      flush();
      if (literal) atom = gbnf_literal(json_escaped(*literal));
      parts.push_back(q ? gbnf_repeat(atom, q->first, q->second) : atom);
    }
    flush();
    return gbnf_seq(parts);
  }

  std::string_view p_;
  std::string any_;
  size_t i_ = 0;
  int group_depth_ = 0;
};

}  // namespace

std::string string_pattern_gbnf(std::string_view pattern, const std::string& any_char_rule) {
  return PatternParser(pattern, any_char_rule).run();
}

}  // namespace infer::grammar
