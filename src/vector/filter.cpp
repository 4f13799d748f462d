#include "vector/filter.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace infer::vector {

enum class Op { Num, Str, Field, Array, Not, Neg, Or, And, Eq, Ne, Lt, Le, Gt, Ge, In, Add, Sub, Mul, Div, Mod, Pow };

struct Filter::Node {
  Op op;
  double num = 0;
  std::string text;                         // string literal or field name
  std::vector<std::unique_ptr<Node>> kids;  // operands (two; any number for and/or) or array items
  int height = 1;                           // levels of this subtree: bounds eval's and ~Node's recursion
};

namespace {

using NodePtr = std::unique_ptr<Filter::Node>;
// Evaluation and destruction recurse once per level of the tree, so its height is bounded (brackets,
// unary chains, right-associative ** and left-associative chains of other operators all add levels;
// an and/or chain is one n-ary node and adds one). The node count bounds the work per element.
constexpr int kMaxDepth = kFilterMaxDepth;
constexpr size_t kMaxNodes = kFilterMaxNodes;
// strtod needs a terminated copy; copying at most this much keeps number lexing O(1) per token.
constexpr size_t kMaxNumberChars = 128;

struct Token {
  enum Kind { End, Num, Str, Field, Op, LParen, RParen, LBracket, RBracket, Comma } kind;
  std::string text;
  double num = 0;
  size_t pos = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) { next(); }

  NodePtr parse_all() {
    auto n = parse_binary(0, 0);
    if (tok_.kind != Token::End) fail("unexpected " + quoted(tok_.text));
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw FilterError("invalid FILTER expression at offset " + std::to_string(tok_.pos) + ": " + why);
  }

  // Quotes a token in an error, shortened: a string literal may be megabytes long.
  static std::string quoted(const std::string& text) {
    return "'" + (text.size() <= 40 ? text : text.substr(0, 40) + "...") + "'";
  }

  NodePtr make(Op op) {
    if (++nodes_ > kMaxNodes)
      fail("more than " + std::to_string(kMaxNodes) + " operands and operators (the FILTER limit)");
    auto n = std::make_unique<Filter::Node>();
    n->op = op;
    return n;
  }

  // Adds a child and checks the height it gives its parent.
  void adopt(Filter::Node& parent, NodePtr kid) {
    parent.height = std::max(parent.height, kid->height + 1);
    parent.kids.push_back(std::move(kid));
    if (parent.height > kMaxDepth)
      fail("expression more than " + std::to_string(kMaxDepth) + " levels deep (the FILTER limit)");
  }

  void next() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    tok_ = Token{Token::End, "", 0, i_};
    if (i_ >= s_.size()) return;
    const char c = s_[i_];
    auto ident_char = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    if (c == '.' && i_ + 1 < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[i_ + 1])) || s_[i_ + 1] == '_')) {
      size_t j = i_ + 1;
      while (j < s_.size() && ident_char(s_[j])) ++j;
      tok_ = {Token::Field, std::string(s_.substr(i_ + 1, j - i_ - 1)), 0, i_};
      i_ = j;
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
      const std::string rest(s_.substr(i_, kMaxNumberChars));
      char* end = nullptr;
      const double v = std::strtod(rest.c_str(), &end);
      const size_t len = static_cast<size_t>(end - rest.c_str());
      tok_ = {Token::Num, rest.substr(0, len), v, i_};
      if (len == rest.size() && i_ + len < s_.size()) fail("number longer than " + std::to_string(kMaxNumberChars) + " characters");
      i_ += len;
      if (i_ < s_.size() && ident_char(s_[i_])) fail("malformed number");
      return;
    }
    if (c == '"' || c == '\'') {
      std::string out;
      size_t j = i_ + 1;
      for (;;) {
        if (j >= s_.size()) fail("unterminated string");
        if (s_[j] == c) break;
        if (s_[j] == '\\') {
          j = unescape(j, &out);
        } else {
          out += s_[j++];
        }
      }
      tok_ = {Token::Str, std::move(out), 0, i_};
      i_ = j + 1;
      return;
    }
    if (std::isalpha(static_cast<unsigned char>(c))) {
      size_t j = i_;
      while (j < s_.size() && ident_char(s_[j])) ++j;
      std::string word(s_.substr(i_, j - i_));
      if (word == "true" || word == "false") {
        tok_ = {Token::Num, word, word == "true" ? 1.0 : 0.0, i_};
      } else if (word == "and" || word == "or" || word == "not" || word == "in") {
        tok_ = {Token::Op, word, 0, i_};
      } else {
        fail("unknown word " + quoted(word) + " (fields are written .name)");
      }
      i_ = j;
      return;
    }
    static const char* const ops[] = {"**", "&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "+", "-", "*", "/", "%"};
    for (const char* op : ops) {
      if (s_.substr(i_).starts_with(op)) {
        tok_ = {Token::Op, op, 0, i_};
        i_ += std::char_traits<char>::length(op);
        return;
      }
    }
    const Token::Kind k = c == '(' ? Token::LParen : c == ')' ? Token::RParen : c == '[' ? Token::LBracket
                        : c == ']' ? Token::RBracket : c == ',' ? Token::Comma : Token::End;
    if (k == Token::End) fail("unexpected character " + quoted(std::string(1, c)));
    tok_ = {k, std::string(1, c), 0, i_};
    ++i_;
  }

  [[noreturn]] void fail_at(size_t pos, const std::string& why) const {
    throw FilterError("invalid FILTER expression at offset " + std::to_string(pos) + ": " + why);
  }

  // Four hex digits at `j`, or fails.
  uint32_t hex4(size_t j, size_t esc) const {
    if (j + 4 > s_.size()) fail_at(esc, "\\u needs four hex digits");
    uint32_t v = 0;
    for (size_t k = j; k < j + 4; ++k) {
      const char h = s_[k];
      const int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (d < 0) fail_at(esc, "\\u needs four hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  static void append_utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // The escape starting with the backslash at `j`: appends what it stands for, returns the index after it.
  // JSON's escapes, plus \' so that either quote can appear in either style of literal.
  size_t unescape(size_t j, std::string* out) const {
    if (j + 1 >= s_.size()) fail_at(j, "unterminated string");
    const char e = s_[j + 1];
    switch (e) {
      case '"': case '\'': case '\\': case '/': *out += e; return j + 2;
      case 'b': *out += '\b'; return j + 2;
      case 'f': *out += '\f'; return j + 2;
      case 'n': *out += '\n'; return j + 2;
      case 'r': *out += '\r'; return j + 2;
      case 't': *out += '\t'; return j + 2;
      case 'u': {
        uint32_t cp = hex4(j + 2, j);
        size_t next = j + 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at(j, "\\u escape is a lone low surrogate");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (next + 1 >= s_.size() || s_[next] != '\\' || s_[next + 1] != 'u')
            fail_at(j, "\\u escape is a high surrogate without its low surrogate");
          const uint32_t lo = hex4(next + 2, next);
          if (lo < 0xDC00 || lo > 0xDFFF) fail_at(next, "\\u escape after a high surrogate is not a low surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          next += 6;
        }
        append_utf8(cp, out);
        return next;
      }
      default:
        fail_at(j, "invalid escape " + quoted(std::string("\\") + e) +
                       " in string (valid: \\\" \\' \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
    }
  }

  // Binary operator at `level` (0 lowest), or nullopt.
  static std::optional<std::pair<Op, int>> binary(const Token& t) {
    if (t.kind != Token::Op) return std::nullopt;
    const std::string& o = t.text;
    if (o == "or" || o == "||") return std::pair{Op::Or, 0};
    if (o == "and" || o == "&&") return std::pair{Op::And, 1};
    if (o == "==") return std::pair{Op::Eq, 2};
    if (o == "!=") return std::pair{Op::Ne, 2};
    if (o == "<") return std::pair{Op::Lt, 2};
    if (o == "<=") return std::pair{Op::Le, 2};
    if (o == ">") return std::pair{Op::Gt, 2};
    if (o == ">=") return std::pair{Op::Ge, 2};
    if (o == "in") return std::pair{Op::In, 2};
    if (o == "+") return std::pair{Op::Add, 3};
    if (o == "-") return std::pair{Op::Sub, 3};
    if (o == "*") return std::pair{Op::Mul, 4};
    if (o == "/") return std::pair{Op::Div, 4};
    if (o == "%") return std::pair{Op::Mod, 4};
    if (o == "**") return std::pair{Op::Pow, 5};
    return std::nullopt;
  }

  NodePtr parse_binary(int min_level, int depth) {
    if (depth > kMaxDepth) fail("expression nested too deeply");
    auto lhs = parse_unary(depth + 1);
    for (;;) {
      auto b = binary(tok_);
      if (!b || b->second < min_level) return lhs;
      next();
      // ** is right-associative; everything else left-associative.
      auto rhs = parse_binary(b->first == Op::Pow ? b->second : b->second + 1, depth + 1);
      const bool logic = b->first == Op::And || b->first == Op::Or;
      if (logic && lhs->op == b->first) {
        adopt(*lhs, std::move(rhs));  // `a and b and c` is one node with three operands
        continue;
      }
      auto n = make(b->first);
      adopt(*n, std::move(lhs));
      adopt(*n, std::move(rhs));
      lhs = std::move(n);
    }
  }

  NodePtr parse_unary(int depth) {
    if (depth > kMaxDepth) fail("expression nested too deeply");
    if (tok_.kind == Token::Op && (tok_.text == "!" || tok_.text == "not" || tok_.text == "-")) {
      auto n = make(tok_.text == "-" ? Op::Neg : Op::Not);
      next();
      adopt(*n, parse_unary(depth + 1));
      return n;
    }
    return parse_primary(depth);
  }

  NodePtr parse_primary(int depth) {
    switch (tok_.kind) {
      case Token::Num: {
        auto n = make(Op::Num);
        n->num = tok_.num;
        next();
        return n;
      }
      case Token::Str: {
        auto n = make(Op::Str);
        n->text = tok_.text;
        next();
        return n;
      }
      case Token::Field: {
        auto n = make(Op::Field);
        n->text = tok_.text;
        next();
        return n;
      }
      case Token::LParen: {
        next();
        auto inner = parse_binary(0, depth + 1);
        if (tok_.kind != Token::RParen) fail("expected ')'");
        next();
        return inner;
      }
      case Token::LBracket: {
        auto n = make(Op::Array);
        next();
        if (tok_.kind == Token::RBracket) {
          next();
          return n;
        }
        for (;;) {
          adopt(*n, parse_binary(0, depth + 1));
          if (tok_.kind == Token::Comma) {
            next();
            continue;
          }
          if (tok_.kind != Token::RBracket) fail("expected ',' or ']' in array");
          next();
          return n;
        }
      }
      case Token::End:
        fail("unexpected end of expression");
      default:
        fail("unexpected " + quoted(tok_.text));
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  Token tok_;
  size_t nodes_ = 0;
};

// Values during evaluation; nullopt means "does not match" (missing field, wrong type). Strings view the
// literal in the tree or the string in the parsed attributes, both alive for the whole evaluation, so
// no operand is ever copied.
struct Value {
  std::variant<double, std::string_view, std::vector<Value>> v;
};
using Maybe = std::optional<Value>;

// Charges the evaluation's budget, when it has one.
struct Meter {
  FilterBudget* budget;
  void operator()(uint64_t units) const {
    if (budget) budget->charge(units);
  }
};

// Attributes nested deeper than the expression may be do not match: from_json and equal() recurse per level.
Maybe from_json(const nlohmann::json& j, Meter meter, int depth = 0) {
  if (depth > kMaxDepth) return std::nullopt;
  if (j.is_boolean()) return Value{j.get<bool>() ? 1.0 : 0.0};
  if (j.is_number()) return Value{j.get<double>()};
  if (j.is_string()) return Value{std::string_view(j.get_ref<const std::string&>())};
  if (j.is_array()) {
    meter(j.size() * kFilterNodeUnits);
    std::vector<Value> items;
    items.reserve(j.size());
    for (const auto& e : j) {
      auto x = from_json(e, meter, depth + 1);
      if (!x) return std::nullopt;
      items.push_back(std::move(*x));
    }
    return Value{std::move(items)};
  }
  return std::nullopt;  // null, objects
}

bool truthy(const Value& x) {
  if (auto* d = std::get_if<double>(&x.v)) return *d != 0;
  if (auto* s = std::get_if<std::string_view>(&x.v)) return !s->empty();
  return !std::get<std::vector<Value>>(x.v).empty();
}

bool equal(const Value& a, const Value& b, Meter meter) {
  if (a.v.index() != b.v.index()) return false;
  if (auto* d = std::get_if<double>(&a.v)) return *d == std::get<double>(b.v);
  if (auto* s = std::get_if<std::string_view>(&a.v)) {
    const auto& t = std::get<std::string_view>(b.v);
    if (s->size() != t.size()) return false;
    meter(s->size());
    return *s == t;
  }
  const auto& x = std::get<std::vector<Value>>(a.v);
  const auto& y = std::get<std::vector<Value>>(b.v);
  if (x.size() != y.size()) return false;
  meter(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    if (!equal(x[i], y[i], meter)) return false;
  return true;
}

// Substring test in time linear in both lengths (glibc's memmem is the two-way algorithm): a quadratic
// search would let one expression hold a thread for the product of the two lengths per element.
bool contains(std::string_view hay, std::string_view needle, Meter meter) {
  if (needle.size() > hay.size()) return false;
  meter((hay.size() + needle.size()) * kFilterSearchByteUnits);
  if (needle.empty()) return true;
  return ::memmem(hay.data(), hay.size(), needle.data(), needle.size()) != nullptr;
}

Value boolean(bool b) { return Value{b ? 1.0 : 0.0}; }

Maybe eval(const Filter::Node& n, const nlohmann::json& obj, Meter meter) {
  meter(kFilterNodeUnits);
  switch (n.op) {
    case Op::Num: return Value{n.num};
    case Op::Str: return Value{std::string_view(n.text)};
    case Op::Field: {
      auto it = obj.find(n.text);
      if (it == obj.end()) return std::nullopt;
      return from_json(*it, meter);
    }
    case Op::Array: {
      std::vector<Value> items;
      items.reserve(n.kids.size());
      for (const auto& k : n.kids) {
        auto x = eval(*k, obj, meter);
        if (!x) return std::nullopt;
        items.push_back(std::move(*x));
      }
      return Value{std::move(items)};
    }
    case Op::Not: {
      auto x = eval(*n.kids[0], obj, meter);
      if (!x) return std::nullopt;
      return boolean(!truthy(*x));
    }
    case Op::Neg: {
      auto x = eval(*n.kids[0], obj, meter);
      if (!x || !std::holds_alternative<double>(x->v)) return std::nullopt;
      return Value{-std::get<double>(x->v)};
    }
    case Op::Or:
      for (const auto& k : n.kids) {
        auto x = eval(*k, obj, meter);
        if (x && truthy(*x)) return boolean(true);
      }
      return boolean(false);
    case Op::And:
      for (const auto& k : n.kids) {
        auto x = eval(*k, obj, meter);
        if (!x || !truthy(*x)) return boolean(false);
      }
      return boolean(true);
    default: break;
  }
  auto a = eval(*n.kids[0], obj, meter);
  if (!a) return std::nullopt;
  auto b = eval(*n.kids[1], obj, meter);
  if (!b) return std::nullopt;
  switch (n.op) {
    case Op::Eq: return boolean(equal(*a, *b, meter));
    case Op::Ne: return boolean(!equal(*a, *b, meter));
    case Op::In: {
      if (auto* arr = std::get_if<std::vector<Value>>(&b->v)) {
        for (const auto& e : *arr)
          if (equal(*a, e, meter)) return boolean(true);
        return boolean(false);
      }
      auto* hay = std::get_if<std::string_view>(&b->v);
      auto* needle = std::get_if<std::string_view>(&a->v);
      if (!hay || !needle) return std::nullopt;
      return boolean(contains(*hay, *needle, meter));
    }
    case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
      int cmp;
      if (std::holds_alternative<double>(a->v) && std::holds_alternative<double>(b->v)) {
        const double x = std::get<double>(a->v), y = std::get<double>(b->v);
        cmp = x < y ? -1 : x > y ? 1 : 0;
        if (std::isnan(x) || std::isnan(y)) return boolean(false);
      } else if (std::holds_alternative<std::string_view>(a->v) && std::holds_alternative<std::string_view>(b->v)) {
        const auto x = std::get<std::string_view>(a->v), y = std::get<std::string_view>(b->v);
        meter(std::min(x.size(), y.size()));
        const int c = x.compare(y);
        cmp = c < 0 ? -1 : c > 0 ? 1 : 0;
      } else {
        return std::nullopt;
      }
      const bool r = n.op == Op::Lt ? cmp < 0 : n.op == Op::Le ? cmp <= 0 : n.op == Op::Gt ? cmp > 0 : cmp >= 0;
      return boolean(r);
    }
    default: break;
  }
  if (!std::holds_alternative<double>(a->v) || !std::holds_alternative<double>(b->v)) return std::nullopt;
  const double x = std::get<double>(a->v), y = std::get<double>(b->v);
  switch (n.op) {
    case Op::Add: return Value{x + y};
    case Op::Sub: return Value{x - y};
    case Op::Mul: return Value{x * y};
    case Op::Div: return Value{x / y};
    case Op::Mod: return Value{std::fmod(x, y)};
    case Op::Pow: return Value{std::pow(x, y)};
    default: return std::nullopt;
  }
}

// Counts what estimate_units() needs: nodes, field reads and literal bytes.
void tally(const Filter::Node& n, uint64_t* nodes, uint64_t* fields, uint64_t* literal_bytes) {
  ++*nodes;
  if (n.op == Op::Field) ++*fields;
  if (n.op == Op::Str) *literal_bytes += n.text.size();
  for (const auto& k : n.kids) tally(*k, nodes, fields, literal_bytes);
}

}  // namespace

Filter::Filter(std::unique_ptr<Node> root) : root_(std::move(root)) {
  tally(*root_, &nodes_, &fields_, &literal_bytes_);
}
Filter::Filter(Filter&&) noexcept = default;
Filter& Filter::operator=(Filter&&) noexcept = default;
Filter::~Filter() = default;

Filter Filter::parse(std::string_view expr) {
  if (expr.size() > kFilterMaxBytes)
    throw FilterError("FILTER expression of " + std::to_string(expr.size()) + " bytes is longer than " +
                      std::to_string(kFilterMaxBytes));
  Parser p(expr);
  return Filter(p.parse_all());
}

uint64_t Filter::estimate_units(uint64_t attr_bytes) const {
  return attr_bytes * kFilterJsonByteUnits + nodes_ * kFilterNodeUnits +
         (literal_bytes_ + fields_ * attr_bytes) * kFilterSearchByteUnits;
}

bool Filter::matches_parsed(const nlohmann::json& attrs, FilterBudget* budget) const {
  if (!attrs.is_object()) return false;
  auto v = eval(*root_, attrs, Meter{budget});
  return v && truthy(*v);
}

bool Filter::matches(std::string_view json_attrs, FilterBudget* budget) const {
  if (json_attrs.empty()) return false;
  if (budget) budget->charge(json_attrs.size() * kFilterJsonByteUnits);  // before the parse it pays for
  auto j = nlohmann::json::parse(json_attrs, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return false;
  return matches_parsed(j, budget);
}

}  // namespace infer::vector
