// Renders a parsed template: scopes as Jinja2 has them (a for body and a macro are scopes, an if is not),
// loop controls, macros, and the work limits that stop hostile templates.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"

namespace infer::chat::jinja {

class Interpreter {
 public:
  Interpreter(const TemplateLimits& limits, ClockFn clock);
  ~Interpreter();  // empties every namespace made, breaking reference cycles such as `ns.self = ns`

  // Renders `body` with `variables` (messages, tools, ...) beside the globals.
  std::string render(const Body& body, std::vector<std::pair<std::string, Value>> variables);

  Value eval(const Expr& e);
  Value call_macro(const Stmt& macro, CallArgs& args);
  Value call(const Value& fn, CallArgs& args);
  Value getattr(const Value& obj, const std::string& name);  // `obj.name`: attribute first, then item
  Value getitem(const Value& obj, const Value& key);         // `obj[key]`: item first, then attribute
  Value iterate(const Value& v);                             // a list of the elements `for` visits
  std::int64_t now_seconds() const;
  void count_steps(std::uint64_t n = 1);  // TemplateError past limits.max_steps
  void check_size(std::size_t bytes) const;  // TemplateError past limits.max_output_bytes
  const TemplateLimits& limits() const { return limits_; }
  void track(std::shared_ptr<NamespaceData> ns) { namespaces_.push_back(std::move(ns)); }

 private:
  struct Scope {
    std::vector<std::pair<std::string, Value>> vars;
    Scope* parent = nullptr;
    Value* find(const std::string& name);
    void set(const std::string& name, Value v);
  };
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void exec_set(const Stmt& s, Value v);
  void assign(const Expr& target, const Value& v);
  Value define_macro(const Stmt& s);
  Value eval_call(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_slice(const Expr& e);
  Value lookup(const std::string& name);
  CallArgs eval_args(const Expr& e, std::size_t first);

  TemplateLimits limits_;
  ClockFn clock_;
  Scope root_;
  Scope* scope_ = &root_;
  std::uint64_t steps_ = 0;
  int call_depth_ = 0;
  int depth_ = 0;
  std::vector<std::shared_ptr<NamespaceData>> namespaces_;
};

// Python's binary operators on values (+ - * / // % **), with Python's errors.
// `max_bytes` bounds what repetition (`'x' * n`, `[x] * n`) may build.
Value binary_op(const std::string& op, const Value& a, const Value& b, std::size_t max_bytes = 64u << 20);

}  // namespace infer::chat::jinja
