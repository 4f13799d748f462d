// The syntax tree of a parsed template: expressions and statements, immutable once parsed so that one
// tree serves concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace infer::chat::jinja {

enum class ExprKind {
  Literal,   // `literal`
  Name,      // `name`
  List,      // `args`: elements
  Tuple,     // `args`: elements
  Dict,      // `args`: key, value, key, value...
  GetAttr,   // args[0].name
  GetItem,   // args[0][args[1]]
  Slice,     // args[0][args[1]:args[2]:args[3]] (null where omitted)
  Call,      // args[0](args[1..], kwargs)
  Filter,    // args[0] | name(args[1..], kwargs); args[0] null in filter blocks
  Test,      // args[0] is [not] name(args[1..])
  Unary,     // name ("-", "+", "not") args[0]
  Binary,    // args[0] name args[1]: + - * / // % ** ~ and or
  Compare,   // args[0] ops[0] args[1] ops[1] args[2]...
  Cond,      // args[0] if args[1] else args[2] (args[2] null: undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 0;
  int column = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

enum class StmtKind { Text, Output, If, For, Set, SetBlock, Macro, FilterBlock, Break, Continue, Block };

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::Text;
  int line = 0;
  int column = 0;
  std::string text;                                      // Text
  ExprPtr expr;                                          // Output, Set value, For iterable
  ExprPtr target;                                        // Set and For targets (Name, Tuple, GetAttr)
  ExprPtr condition;                                     // For's `if` filter
  std::vector<std::pair<ExprPtr, Body>> branches;        // If: condition, body (null condition: else)
  Body body;                                             // For, SetBlock, Macro, FilterBlock, Block
  Body else_body;                                        // For
  std::string name;                                      // Macro
  std::vector<std::pair<std::string, ExprPtr>> params;   // Macro parameters and defaults (null: none)
  std::vector<ExprPtr> filters;                          // SetBlock, FilterBlock: filters, args[0] null
};

// Parses a template; throws TemplateError "TemplateSyntaxError: line L column C: ..." where it fails.
Body parse_template(std::string_view source);

}  // namespace infer::chat::jinja
