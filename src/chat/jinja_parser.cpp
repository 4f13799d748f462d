// Recursive-descent parser for Jinja2 templates, following Jinja2's grammar and operator precedence:
// conditional < or < and < not < comparisons < + - < ~ < * / // % < ** < unary < filters and tests.
#include <cerrno>
#include <cstdlib>
#include <set>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace infer::chat::jinja {
namespace {

constexpr int kMaxNesting = 200;  // hostile templates: nested brackets, blocks and operators

// Integers past int64 become floats (Python would keep them exact; no template needs that).
Value number_literal(const std::string& text, bool integer) {
  errno = 0;
  if (integer) {
    long long v = std::strtoll(text.c_str(), nullptr, 10);
    if (errno != ERANGE) return Value::integer(v);
  }
  return Value::real(std::strtod(text.c_str(), nullptr));
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_all() {
    Body body = parse_body({});
    if (cur().kind != TokenKind::End) error("unexpected tag");
    return body;
  }

 private:
  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  int depth_ = 0;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.error("template nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(std::size_t ahead = 1) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  void advance() { if (pos_ + 1 < toks_.size()) ++pos_; }

  [[noreturn]] void error(const std::string& what) const {
    fail("TemplateSyntaxError",
         "line " + std::to_string(cur().line) + " column " + std::to_string(cur().column) + ": " + what);
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::End: return "end of template";
      case TokenKind::VarEnd: return "end of print statement";
      case TokenKind::BlockEnd: return "end of statement block";
      case TokenKind::Text: return "template data";
      default: return "'" + t.text + "'";
    }
  }

  bool is_op(std::string_view op) const { return cur().kind == TokenKind::Op && cur().text == op; }
  bool is_name(std::string_view name) const { return cur().kind == TokenKind::Name && cur().text == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) error("expected '" + std::string(op) + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != TokenKind::Name) error("expected name, got " + describe(cur()));
    std::string n = cur().text;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().kind != TokenKind::BlockEnd) error("expected end of statement block, got " + describe(cur()));
    advance();
  }

  ExprPtr node(ExprKind kind) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = cur().line;
    e->column = cur().column;
    return e;
  }

  // ---- statements ----

  // Parses until a block tag whose name is in `ends` (left unconsumed, positioned at its name) or the end.
  Body parse_body(const std::set<std::string>& ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == TokenKind::End) {
        if (!ends.empty()) error("unexpected end of template, expected '" + *ends.begin() + "'");
        return body;
      }
      if (t.kind == TokenKind::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.kind == TokenKind::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->line = t.line;
        s->column = t.column;
        advance();
        s->expr = parse_tuple(true);
        if (cur().kind != TokenKind::VarEnd) error("expected end of print statement, got " + describe(cur()));
        advance();
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::BlockBegin) {
        advance();
        if (cur().kind != TokenKind::Name) error("tag name expected");
        if (ends.count(cur().text)) return body;
        body.push_back(parse_statement());
      } else {
        error("unexpected " + describe(t));
      }
    }
  }

  StmtPtr make_stmt(StmtKind kind) const {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = cur().line;
    s->column = cur().column;
    return s;
  }

  StmtPtr parse_statement() {
    std::string tag = cur().text;
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "filter") return parse_filter_block();
    if (tag == "break" || tag == "continue") {
      auto s = make_stmt(tag == "break" ? StmtKind::Break : StmtKind::Continue);
      advance();
      expect_block_end();
      return s;
    }
    if (tag == "generation") {
      auto s = make_stmt(StmtKind::Block);
      advance();
      expect_block_end();
      s->body = parse_body({"endgeneration"});
      advance();
      expect_block_end();
      return s;
    }
    error("Encountered unknown tag '" + tag + "'.");
  }

  StmtPtr parse_if() {
    auto s = make_stmt(StmtKind::If);
    advance();
    ExprPtr condition = parse_tuple(true);
    expect_block_end();
    while (true) {
      Body body = parse_body({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(condition), std::move(body));
      std::string tag = cur().text;
      advance();
      if (tag == "elif") {
        condition = parse_tuple(true);
        expect_block_end();
      } else if (tag == "else") {
        expect_block_end();
        s->branches.emplace_back(nullptr, parse_body({"endif"}));
        advance();
        expect_block_end();
        return s;
      } else {
        expect_block_end();
        return s;
      }
    }
  }

  ExprPtr parse_assign_target(bool with_namespace) {
    if (with_namespace && cur().kind == TokenKind::Name && peek().kind == TokenKind::Op && peek().text == ".") {
      auto ns = node(ExprKind::Name);
      ns->name = expect_name();
      advance();
      auto attr = node(ExprKind::GetAttr);
      attr->name = expect_name();
      attr->args.push_back(std::move(ns));
      return attr;
    }
    auto tuple = node(ExprKind::Tuple);
    bool comma = false;
    while (true) {
      auto name = node(ExprKind::Name);
      name->name = expect_name();
      tuple->args.push_back(std::move(name));
      if (!skip_op(",")) break;
      comma = true;
      if (cur().kind != TokenKind::Name) break;
    }
    if (!comma) return std::move(tuple->args[0]);
    return tuple;
  }

  StmtPtr parse_for() {
    auto s = make_stmt(StmtKind::For);
    advance();
    s->target = parse_assign_target(false);
    if (!skip_name("in")) error("expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, {"recursive"});
    if (skip_name("if")) s->condition = parse_expression(true);
    if (skip_name("recursive")) error("recursive loops are not supported");
    expect_block_end();
    s->body = parse_body({"endfor", "else"});
    if (cur().text == "else") {
      advance();
      expect_block_end();
      s->else_body = parse_body({"endfor"});
    }
    advance();
    expect_block_end();
    return s;
  }

  StmtPtr parse_set() {
    auto s = make_stmt(StmtKind::Set);
    advance();
    s->target = parse_assign_target(true);
    if (skip_op("=")) {
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    s->kind = StmtKind::SetBlock;
    while (skip_op("|")) s->filters.push_back(parse_filter_call(nullptr));
    expect_block_end();
    s->body = parse_body({"endset"});
    advance();
    expect_block_end();
    return s;
  }

  StmtPtr parse_macro() {
    auto s = make_stmt(StmtKind::Macro);
    advance();
    s->name = expect_name();
    expect_op("(");
    while (!skip_op(")")) {
      if (!s->params.empty()) expect_op(",");
      std::string param = expect_name();
      ExprPtr fallback;
      if (skip_op("=")) fallback = parse_expression(true);
      else if (!s->params.empty() && s->params.back().second) error("non-default argument follows default argument");
      s->params.emplace_back(std::move(param), std::move(fallback));
    }
    expect_block_end();
    s->body = parse_body({"endmacro"});
    advance();
    if (cur().kind == TokenKind::Name) advance();
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = make_stmt(StmtKind::FilterBlock);
    advance();
    do {
      s->filters.push_back(parse_filter_call(nullptr));
    } while (skip_op("|"));
    expect_block_end();
    s->body = parse_body({"endfilter"});
    advance();
    expect_block_end();
    return s;
  }

  // ---- expressions ----

  bool at_tuple_end(const std::set<std::string>& extra_ends) const {
    const Token& t = cur();
    if (t.kind == TokenKind::VarEnd || t.kind == TokenKind::BlockEnd || t.kind == TokenKind::End) return true;
    if (t.kind == TokenKind::Op && (t.text == ")")) return true;
    if (t.kind == TokenKind::Name && extra_ends.count(t.text)) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, const std::set<std::string>& ends = {},
                      bool explicit_parentheses = false) {
    auto tuple = node(ExprKind::Tuple);
    bool is_tuple = false;
    while (true) {
      if (!tuple->args.empty()) expect_op(",");
      if (at_tuple_end(ends)) break;
      tuple->args.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!tuple->args.empty()) return std::move(tuple->args[0]);
      if (!explicit_parentheses) error("Expected an expression, got " + describe(cur()));
    }
    return tuple;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    if (!with_condexpr) return parse_or();
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      auto cond = node(ExprKind::Cond);
      advance();
      ExprPtr test = parse_or();
      ExprPtr otherwise;
      if (skip_name("else")) otherwise = parse_expression(true);
      cond->args.push_back(std::move(expr));
      cond->args.push_back(std::move(test));
      cond->args.push_back(std::move(otherwise));
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right) {
    auto b = node(ExprKind::Binary);
    b->line = left->line;
    b->column = left->column;
    b->name = std::move(op);
    b->args.push_back(std::move(left));
    b->args.push_back(std::move(right));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary("or", std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary("and", std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto u = node(ExprKind::Unary);
      advance();
      u->name = "not";
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().kind == TokenKind::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
           cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().kind == TokenKind::Name && peek().text == "in") {
        op = "not in";
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(ExprKind::Compare);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      advance();
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (skip_op("~")) left = binary("~", std::move(left), parse_math2());
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      advance();
      left = binary(op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) left = binary("**", std::move(left), parse_unary(true));
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = node(ExprKind::Unary);
      e->name = cur().text;
      advance();
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    auto e = node(ExprKind::Literal);
    switch (t.kind) {
      case TokenKind::Name:
        if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
        else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
        else if (t.text == "none" || t.text == "None") e->literal = Value::none();
        else {
          e->kind = ExprKind::Name;
          e->name = t.text;
        }
        advance();
        return e;
      case TokenKind::String: {
        std::string s;
        while (cur().kind == TokenKind::String) {
          s += cur().text;
          advance();
        }
        e->literal = Value::string(std::move(s));
        return e;
      }
      case TokenKind::Int:
        e->literal = number_literal(t.text, true);
        advance();
        return e;
      case TokenKind::Float:
        e->literal = number_literal(t.text, false);
        advance();
        return e;
      case TokenKind::Op:
        if (t.text == "(") {
          advance();
          ExprPtr inner = parse_tuple(true, {}, true);
          expect_op(")");
          return inner;
        }
        if (t.text == "[") {
          e->kind = ExprKind::List;
          advance();
          while (!skip_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (skip_op("]")) break;
            e->args.push_back(parse_expression(true));
          }
          return e;
        }
        if (t.text == "{") {
          e->kind = ExprKind::Dict;
          advance();
          while (!skip_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (skip_op("}")) break;
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
          return e;
        }
        break;
      default: break;
    }
    error("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".") || is_op("[")) e = parse_subscript(std::move(e));
      else if (is_op("(")) e = parse_call(std::move(e));
      else return e;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (skip_op("|")) e = parse_filter_call(std::move(e));
      else if (is_name("is")) e = parse_test(std::move(e));
      else if (is_op("(")) e = parse_call(std::move(e));
      else return e;
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    DepthGuard guard(*this);
    if (skip_op(".")) {
      if (cur().kind == TokenKind::Int) {
        auto item = node(ExprKind::GetItem);
        auto index = node(ExprKind::Literal);
        index->literal = number_literal(cur().text, true);
        advance();
        item->args.push_back(std::move(obj));
        item->args.push_back(std::move(index));
        return item;
      }
      auto attr = node(ExprKind::GetAttr);
      attr->name = expect_name();
      attr->args.push_back(std::move(obj));
      return attr;
    }
    expect_op("[");
    std::vector<ExprPtr> parts;
    while (!skip_op("]")) {
      if (!parts.empty()) expect_op(",");
      parts.push_back(parse_subscribed());
    }
    if (parts.empty()) error("expected subscript expression");
    ExprPtr index;
    if (parts.size() == 1) {
      index = std::move(parts[0]);
    } else {
      index = node(ExprKind::Tuple);
      for (auto& p : parts) index->args.push_back(std::move(p));
    }
    if (index->kind == ExprKind::Slice) {
      index->args[0] = std::move(obj);
      return index;
    }
    auto item = node(ExprKind::GetItem);
    item->args.push_back(std::move(obj));
    item->args.push_back(std::move(index));
    return item;
  }

  // An index or a slice; a slice's args[0] is left for the object.
  ExprPtr parse_subscribed() {
    auto slice = node(ExprKind::Slice);
    slice->args.resize(4);
    if (!is_op(":")) {
      ExprPtr first = parse_expression(true);
      if (!is_op(":")) return first;
      slice->args[1] = std::move(first);
    }
    advance();
    if (!is_op(":") && !is_op("]") && !is_op(",")) slice->args[2] = parse_expression(true);
    if (skip_op(":"))
      if (!is_op("]") && !is_op(",")) slice->args[3] = parse_expression(true);
    return slice;
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) {
        expect_op(",");
        if (skip_op(")")) return;
      }
      first = false;
      if (cur().kind == TokenKind::Name && peek().kind == TokenKind::Op && peek().text == "=") {
        std::string key = expect_name();
        advance();
        call.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!call.kwargs.empty()) error("positional argument after keyword argument");
        call.args.push_back(parse_expression(true));
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = node(ExprKind::Call);
    call->args.push_back(std::move(callee));
    parse_call_args(*call);
    return call;
  }

  ExprPtr parse_filter_call(ExprPtr input) {
    auto f = node(ExprKind::Filter);
    f->name = expect_name();
    while (skip_op(".")) f->name += "." + expect_name();
    f->args.push_back(std::move(input));
    if (is_op("(")) parse_call_args(*f);
    return f;
  }

  ExprPtr parse_test(ExprPtr input) {
    auto t = node(ExprKind::Test);
    advance();
    if (skip_name("not")) t->negated = true;
    t->name = expect_name();
    while (skip_op(".")) t->name += "." + expect_name();
    t->args.push_back(std::move(input));
    if (is_op("(")) {
      parse_call_args(*t);
    } else if ((cur().kind == TokenKind::Name || cur().kind == TokenKind::String || cur().kind == TokenKind::Int ||
                cur().kind == TokenKind::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("You cannot chain multiple tests with is");
      t->args.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse_all(); }

}  // namespace infer::chat::jinja
