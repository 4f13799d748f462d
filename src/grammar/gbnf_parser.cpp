// GBNF text → Grammar. Recursive descent over the text; groups and repetitions become rules of their
// own (x* is r ::= x r | ε, x+ is x r, x? is r ::= x | ε, x{m,n} is m copies of x then n - m nested
// optionals), so that the recogniser sees only characters, rule references and alternatives.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "grammar/gbnf.h"

namespace infer::grammar {

GrammarError::GrammarError(int l, int c, const std::string& what)
    : std::runtime_error("line " + std::to_string(l) + ", column " + std::to_string(c) + ": " + what), line(l), column(c) {}

namespace {

constexpr int kMaxRepetition = 2000;  // llama.cpp's limit on a {m,n} count
// Recursion bounds, so that no grammar text can exhaust a thread's stack: groups nested in the text,
// and rules reached one through the other before any character (the recogniser expands such a chain
// recursively).
constexpr int kMaxGroupDepth = 256;
constexpr int kMaxLeftmostChain = 1000;

struct Item {
  bool is_rule = false;
  bool negated = false;
  uint32_t rule = 0;
  std::vector<CharRange> ranges;
};
using Sequence = std::vector<Item>;
using Alternatives = std::vector<Sequence>;

Item chars(uint32_t cp) { return Item{false, false, 0, {{cp, cp}}}; }
Item ref(uint32_t rule) { return Item{true, false, rule, {}}; }

}  // namespace

class GrammarBuilder {
 public:
  explicit GrammarBuilder(std::string_view text) : text_(text) {}

  std::shared_ptr<const Grammar> build() {
    skip_space(true);
    while (pos_ < text_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (size_t r = 0; r < rules_.size(); ++r)
      if (!defined_[r]) fail_at(first_use_[r], "undefined rule '" + names_[r] + "'");
    auto root = ids_.find("root");
    if (root == ids_.end() || !defined_[root->second]) fail_at(0, "the grammar has no rule named 'root'");
    check_left_recursion();
    return flatten(root->second);
  }

 private:
  // ---- errors -------------------------------------------------------------------------------------
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError(line, col, what);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

  // ---- lexing -------------------------------------------------------------------------------------
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // Blanks and comments; newlines only when `newline_ok` (inside parentheses, after ::= and |).
  void skip_space(bool newline_ok) {
    while (!at_end()) {
      char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newline_ok)) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      char c = peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits in the escape");
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    if (v > 0x10FFFF) fail("escape names a code point above U+10FFFF");
    return v;
  }

  // One character of a literal or class, escapes decoded; the text must be valid UTF-8.
  uint32_t parse_char() {
    if (at_end()) fail("unexpected end of the grammar");
    const size_t start = pos_;
    unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return uint8_t(e);
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        default:
          fail_at(start, e == '\0' ? std::string("unterminated escape")
                                   : "unknown escape '\\" + std::string(1, e) + "'");
      }
    }
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0) fail("invalid UTF-8 in the grammar");
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      unsigned char b = static_cast<unsigned char>(peek(i));
      if ((b >> 6) != 2) fail("invalid UTF-8 in the grammar");
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += len;
    return cp;
  }

  // ---- rules --------------------------------------------------------------------------------------
  uint32_t rule_id(const std::string& name, size_t used_at) {
    auto [it, fresh] = ids_.try_emplace(name, uint32_t(rules_.size()));
    if (fresh) {
      rules_.emplace_back();
      names_.push_back(name);
      origin_.push_back(uint32_t(rules_.size() - 1));
      defined_.push_back(false);
      first_use_.push_back(used_at);
      def_at_.push_back(used_at);
    }
    return it->second;
  }
  // A rule made for a group or repetition inside rule `owner`.
  uint32_t new_rule(uint32_t owner, Alternatives alts) {
    const uint32_t id = uint32_t(rules_.size());
    rules_.push_back(std::move(alts));
    names_.push_back(names_[origin_[owner]] + "-" + std::to_string(id));
    origin_.push_back(origin_[owner]);
    defined_.push_back(true);
    first_use_.push_back(pos_);
    def_at_.push_back(def_at_[origin_[owner]]);
    return id;
  }

  void parse_rule() {
    const size_t start = pos_;
    const std::string name = parse_name();
    const uint32_t id = rule_id(name, start);
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    Alternatives alts = parse_alternatives(id, false);
    rules_[id] = std::move(alts);
    defined_[id] = true;
    def_at_[id] = start;
    if (!at_end() && peek() != '\n' && peek() != '\r') fail("expected the end of the line after rule '" + name + "'");
  }

  Alternatives parse_alternatives(uint32_t owner, bool nested) {
    Alternatives alts;
    alts.push_back(parse_sequence(owner, nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(owner, nested));
    }
    return alts;
  }

  Sequence parse_sequence(uint32_t owner, bool nested) {
    Sequence seq;
    size_t last_start = 0;  // where the last item starts in seq (a literal is several items)
    for (;;) {
      const char c = peek();
      if (at_end()) break;
      if (c == '"') {
        ++pos_;
        last_start = seq.size();
        while (peek() != '"') {
          if (at_end() || peek() == '\n') fail("unterminated string literal");
          seq.push_back(chars(parse_char()));
        }
        ++pos_;
        if (last_start == seq.size()) last_start = seq.size() + 1;  // "" : nothing to repeat
      } else if (c == '[') {
        ++pos_;
        Item item;
        if (peek() == '^') {
          item.negated = true;
          ++pos_;
        }
        while (peek() != ']') {
          if (at_end()) fail("unterminated character class");
          uint32_t lo = parse_char(), hi = lo;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
            ++pos_;
            hi = parse_char();
            if (hi < lo) fail("character range is backwards");
          }
          item.ranges.push_back({lo, hi});
        }
        ++pos_;
        last_start = seq.size();
        seq.push_back(std::move(item));
      } else if (c == '.') {
        ++pos_;
        last_start = seq.size();
        seq.push_back(Item{false, true, 0, {}});
      } else if (is_name_char(c)) {
        const size_t at = pos_;
        last_start = seq.size();
        seq.push_back(ref(rule_id(parse_name(), at)));
      } else if (c == '(') {
        if (++group_depth_ > kMaxGroupDepth) fail("groups nested deeper than " + std::to_string(kMaxGroupDepth));
        ++pos_;
        skip_space(true);
        Alternatives alts = parse_alternatives(owner, true);
        if (peek() != ')') fail("expected ')'");
        ++pos_;
        --group_depth_;
        last_start = seq.size();
        seq.push_back(ref(new_rule(owner, std::move(alts))));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (seq.empty() || last_start >= seq.size()) fail(std::string("'") + c + "' has nothing before it to repeat");
        apply_repetition(owner, seq, last_start);
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  int parse_count() {
    size_t start = pos_;
    long v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepetition) fail_at(start, "repetition count above " + std::to_string(kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number in the repetition");
    return int(v);
  }

  // Replaces seq[last_start..] (the last item: a literal counts whole) by its repetition.
  void apply_repetition(uint32_t owner, Sequence& seq, size_t last_start) {
    Sequence item(seq.begin() + long(last_start), seq.end());
    seq.resize(last_start);
    int min = 0, max = -1;  // max -1: unbounded
    const char op = peek();
    ++pos_;
    if (op == '*') {
      min = 0;
    } else if (op == '+') {
      min = 1;
    } else if (op == '?') {
      max = 1;
    } else {
      skip_space(true);
      if (peek() == ',') {
        min = 0;
      } else {
        min = parse_count();
        skip_space(true);
      }
      if (peek() == ',') {
        ++pos_;
        skip_space(true);
        max = peek() == '}' ? -1 : parse_count();
        skip_space(true);
      } else {
        max = min;
      }
      if (peek() != '}') fail("expected '}' to close the repetition");
      ++pos_;
      if (max >= 0 && max < min) fail("repetition maximum is below its minimum");
    }
    // A literal of several characters is one item: make it a rule so that copies stay small.
    if (item.size() != 1) item = {ref(new_rule(owner, {item}))};
    for (int i = 0; i < min; ++i) seq.push_back(item[0]);
    if (max < 0) {
      // r ::= x r | ε
      const uint32_t r = new_rule(owner, {});
      rules_[r] = {{item[0], ref(r)}, {}};
      seq.push_back(ref(r));
    } else if (max > min) {
      // Nested optionals: r1 ::= x r2 | ε, ..., rk ::= x | ε.
      std::optional<uint32_t> inner;
      for (int i = 0; i < max - min; ++i) {
        Sequence s{item[0]};
        if (inner) s.push_back(ref(*inner));
        inner = new_rule(owner, {s, {}});
      }
      seq.push_back(ref(*inner));
    }
  }

  // ---- checks -------------------------------------------------------------------------------------
  // A rule that can reach itself before any character would make the recogniser expand forever.
  void check_left_recursion() const {
    const size_t n = rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Sequence& s : rules_[r]) {
          if (std::all_of(s.begin(), s.end(), [&](const Item& it) { return it.is_rule && nullable[it.rule]; })) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> leftmost(n);
    for (size_t r = 0; r < n; ++r)
      for (const Sequence& s : rules_[r])
        for (const Item& it : s) {
          if (!it.is_rule) break;
          leftmost[r].push_back(it.rule);
          if (!nullable[it.rule]) break;
        }
    // Depth-first search for a cycle: 0 unvisited, 1 on the path, 2 done.
    std::vector<uint8_t> mark(n, 0);
    std::vector<int> chain(n, 0);  // longest run of leftmost references from the rule, itself included
    std::vector<std::pair<uint32_t, size_t>> path;
    for (uint32_t start = 0; start < n; ++start) {
      if (mark[start]) continue;
      path.push_back({start, 0});
      mark[start] = 1;
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == leftmost[r].size()) {
          mark[r] = 2;
          chain[r] = 1;
          for (uint32_t to : leftmost[r]) chain[r] = std::max(chain[r], chain[to] + 1);
          if (chain[r] > kMaxLeftmostChain)
            fail_at(def_at_[origin_[r]], "rule '" + names_[origin_[r]] + "' starts a chain of more than " +
                                              std::to_string(kMaxLeftmostChain) + " rules before any character");
          path.pop_back();
          continue;
        }
        const uint32_t to = leftmost[r][next++];
        if (mark[to] == 1) {
          const uint32_t user_rule = origin_[to];
          fail_at(def_at_[user_rule], "rule '" + names_[user_rule] +
                                          "' is left-recursive (it can reach itself before any character), "
                                          "which is not supported: rewrite it with repetition");
        }
        if (mark[to] == 0) {
          mark[to] = 1;
          path.push_back({to, 0});
        }
      }
    }
  }

  // ---- output -------------------------------------------------------------------------------------
  std::shared_ptr<const Grammar> flatten(uint32_t root) {
    auto g = std::make_shared<Grammar>();
    g->root_ = root;
    g->names_ = names_;
    g->rules_.resize(rules_.size());
    auto push = [&](Element e) {
      g->elements_.push_back(e);
      g->ascii_.push_back({0, 0});
    };
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& s : rules_[r]) {
        g->rules_[r].push_back(uint32_t(g->elements_.size()));
        for (const Item& it : s) {
          Element e;
          if (it.is_rule) {
            e.kind = Element::Kind::Rule;
            e.rule = it.rule;
            push(e);
            continue;
          }
          e.kind = Element::Kind::Chars;
          e.negated = it.negated;
          std::vector<CharRange> rs = it.ranges;
          std::sort(rs.begin(), rs.end(), [](auto a, auto b) { return a.lo < b.lo; });
          e.ranges_begin = uint32_t(g->ranges_.size());
          for (const CharRange& cr : rs) {
            if (g->ranges_.size() > e.ranges_begin && cr.lo <= g->ranges_.back().hi + 1)
              g->ranges_.back().hi = std::max(g->ranges_.back().hi, cr.hi);
            else
              g->ranges_.push_back(cr);
          }
          e.ranges_end = uint32_t(g->ranges_.size());
          push(e);
          auto& bits = g->ascii_.back();
          for (uint32_t cp = 0; cp < 128; ++cp) {
            bool in = false;
            for (uint32_t k = e.ranges_begin; k < e.ranges_end; ++k) in |= cp >= g->ranges_[k].lo && cp <= g->ranges_[k].hi;
            if (in != e.negated) bits[cp >> 6] |= uint64_t(1) << (cp & 63);
          }
        }
        push(Element{});  // End
      }
    }
    return g;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int group_depth_ = 0;
  std::map<std::string, uint32_t> ids_;
  std::vector<Alternatives> rules_;
  std::vector<std::string> names_;
  std::vector<uint32_t> origin_;   // the user's rule a rule was made for (itself for user rules)
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;  // where a rule was first named
  std::vector<size_t> def_at_;     // where its definition starts
};

std::shared_ptr<const Grammar> parse_gbnf(std::string_view text) { return GrammarBuilder(text).build(); }

bool Grammar::matches_slow(uint32_t pos, uint32_t cp) const {
  const Element& e = elements_[pos];
  bool in = false;
  for (uint32_t k = e.ranges_begin; k < e.ranges_end && !in; ++k) in = cp >= ranges_[k].lo && cp <= ranges_[k].hi;
  return in != e.negated;
}

bool Grammar::ranges_meet(const Element& e, uint32_t lo, uint32_t hi) const {
  for (uint32_t k = e.ranges_begin; k < e.ranges_end; ++k)
    if (ranges_[k].lo <= hi && ranges_[k].hi >= lo) return true;
  return false;
}

bool Grammar::ranges_cover(const Element& e, uint32_t lo, uint32_t hi) const {
  // The ranges are sorted and merged: walk them from lo until a gap or past hi.
  uint64_t cur = lo;
  for (uint32_t k = e.ranges_begin; k < e.ranges_end; ++k) {
    if (ranges_[k].hi < cur) continue;
    if (ranges_[k].lo > cur) return false;
    cur = uint64_t(ranges_[k].hi) + 1;
    if (cur > hi) return true;
  }
  return cur > hi;
}

bool Grammar::matches_some(uint32_t pos, uint32_t lo, uint32_t hi) const {
  const Element& e = elements_[pos];
  return e.negated ? !ranges_cover(e, lo, hi) : ranges_meet(e, lo, hi);
}

bool Grammar::matches_all(uint32_t pos, uint32_t lo, uint32_t hi) const {
  const Element& e = elements_[pos];
  return e.negated ? !ranges_meet(e, lo, hi) : ranges_cover(e, lo, hi);
}

}  // namespace infer::grammar
