// Tree-walking evaluation of a parsed template (see jinja_interpreter.h).
#include "chat/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <ctime>

#include "chat/jinja_builtins.h"

namespace infer::chat::jinja {

Interpreter::Interpreter(const TemplateLimits& limits, ClockFn clock) : limits_(limits), clock_(std::move(clock)) {}

Interpreter::~Interpreter() {
  for (auto& ns : namespaces_) ns->attrs.clear();
}

Value* Interpreter::Scope::find(const std::string& name) {
  for (Scope* s = this; s; s = s->parent)
    for (auto it = s->vars.rbegin(); it != s->vars.rend(); ++it)
      if (it->first == name) return &it->second;
  return nullptr;
}

void Interpreter::Scope::set(const std::string& name, Value v) {
  for (auto& [k, val] : vars)
    if (k == name) {
      val = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

std::int64_t Interpreter::now_seconds() const {
  if (clock_) return clock_();
  std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  return std::int64_t(timegm(&local));
}

void Interpreter::count_steps(std::uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    fail("TemplateRuntimeError", "the template did more than " + std::to_string(limits_.max_steps) + " steps of work");
}

void Interpreter::check_size(std::size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    fail("TemplateRuntimeError", "the template's output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
}

std::string Interpreter::render(const Body& body, std::vector<std::pair<std::string, Value>> variables) {
  root_.vars = make_globals();
  for (auto& [name, value] : variables) root_.set(name, std::move(value));
  std::string out;
  exec(body, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

namespace {
// Counts one level of nesting for as long as it lives; hostile templates must not exhaust the stack.
struct Nest {
  int& depth;
  Nest(int& d, int limit) : depth(d) {
    if (++depth > limit) {
      --depth;
      fail("RecursionError", "the template nests deeper than " + std::to_string(limit) + " levels while rendering");
    }
  }
  ~Nest() { --depth; }
};

// Restores the interpreter's scope when a block ends, also on errors.
template <class T>
struct Restore {
  T& slot;
  T saved;
  Restore(T& s, T value) : slot(s), saved(s) { slot = value; }
  ~Restore() { slot = saved; }
};

Value apply_filters(Interpreter& in, const std::vector<ExprPtr>& filters, Value v) {
  for (const auto& f : filters) {
    CallArgs args;
    for (std::size_t k = 1; k < f->args.size(); ++k) args.positional.push_back(in.eval(*f->args[k]));
    for (const auto& [key, e] : f->kwargs) args.keyword.emplace_back(key, in.eval(*e));
    v = apply_filter(in, f->name, v, args);
  }
  return v;
}
}  // namespace

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, std::string& out) {
  count_steps();
  Nest nest(depth_, limits_.max_depth);
  switch (s.kind) {
    case StmtKind::Text:
      out += s.text;
      check_size(out.size());
      return Flow::Normal;
    case StmtKind::Output:
      out += to_str(eval(*s.expr));
      check_size(out.size());
      return Flow::Normal;
    case StmtKind::If:
      for (const auto& [condition, body] : s.branches)
        if (!condition || truthy(eval(*condition))) return exec(body, out);
      return Flow::Normal;
    case StmtKind::For: return exec_for(s, out);
    case StmtKind::Set: assign(*s.target, eval(*s.expr)); return Flow::Normal;
    case StmtKind::SetBlock: {
      std::string captured;
      {
        Scope block{{}, scope_};
        Restore<Scope*> guard(scope_, &block);
        exec(s.body, captured);
      }
      assign(*s.target, apply_filters(*this, s.filters, Value::string(std::move(captured))));
      return Flow::Normal;
    }
    case StmtKind::Macro: scope_->set(s.name, define_macro(s)); return Flow::Normal;
    case StmtKind::FilterBlock: {
      std::string captured;
      Flow f = exec(s.body, captured);
      out += to_str(apply_filters(*this, s.filters, Value::string(std::move(captured))));
      check_size(out.size());
      return f;
    }
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
    case StmtKind::Block: return exec(s.body, out);
  }
  return Flow::Normal;
}

void Interpreter::assign(const Expr& target, const Value& v) {
  if (target.kind == ExprKind::Name) {
    scope_->set(target.name, v);
  } else if (target.kind == ExprKind::GetAttr) {
    Value ns = eval(*target.args[0]);
    if (ns.type != Type::Namespace) fail("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
    if (Value* slot = ns.ns->find(target.name)) *slot = v;
    else ns.ns->attrs.emplace_back(target.name, v);
  } else if (target.kind == ExprKind::Tuple) {
    Value seq = iterate(v);
    const auto& items = seq.items();
    if (items.size() < target.args.size())
      fail("ValueError", "not enough values to unpack (expected " + std::to_string(target.args.size()) + ", got " +
                             std::to_string(items.size()) + ")");
    if (items.size() > target.args.size())
      fail("ValueError", "too many values to unpack (expected " + std::to_string(target.args.size()) + ")");
    for (std::size_t k = 0; k < items.size(); ++k) assign(*target.args[k], items[k]);
  } else {
    fail("TemplateSyntaxError", "cannot assign to this expression");
  }
}

Value Interpreter::iterate(const Value& v) {
  switch (v.type) {
    case Type::Undefined: return Value::make_list({});
    case Type::List: return v;
    case Type::Dict: {
      std::vector<Value> keys;
      for (const auto& [k, val] : v.entries()) keys.push_back(k);
      return Value::make_list(std::move(keys));
    }
    case Type::String: {
      std::vector<Value> chars;
      for (char32_t c : utf8_decode(v.s)) {
        std::string one;
        utf8_append(one, c);
        chars.push_back(Value::string(std::move(one)));
      }
      return Value::make_list(std::move(chars));
    }
    default: fail("TypeError", "'" + type_name(v) + "' object is not iterable");
  }
}

// Jinja's `loop` object for iteration `k`. Out of line: its temporaries would otherwise sit in every
// nested for's stack frame.
[[gnu::noinline]] static Value loop_object(const std::vector<Value>& items, std::int64_t k) {
  const std::int64_t n = std::int64_t(items.size());
  std::vector<std::pair<Value, Value>> loop;
  loop.reserve(12);
  auto add = [&](const char* key, Value v) { loop.emplace_back(Value::string(key), std::move(v)); };
  add("index", Value::integer(k + 1));
  add("index0", Value::integer(k));
  add("revindex", Value::integer(n - k));
  add("revindex0", Value::integer(n - k - 1));
  add("first", Value::boolean(k == 0));
  add("last", Value::boolean(k == n - 1));
  add("length", Value::integer(n));
  add("depth", Value::integer(1));
  add("depth0", Value::integer(0));
  auto missing = [](const char* hint) {
    Value u = Value::undefined();
    auto info = std::make_shared<UndefinedInfo>(*u.undef);
    info->hint = hint;
    u.undef = std::move(info);
    return u;
  };
  add("previtem", k > 0 ? items[std::size_t(k - 1)] : missing("there is no previous item"));
  add("nextitem", k + 1 < n ? items[std::size_t(k + 1)] : missing("there is no next item"));
  add("cycle", Value::callable("cycle", [k](Interpreter&, CallArgs& a) {
        if (a.positional.empty()) fail("TypeError", "no items for cycling given");
        return a.positional[std::size_t(k) % a.positional.size()];
      }));
  return Value::make_dict(std::move(loop));
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, std::string& out) {
  Value seq = iterate(eval(*s.expr));
  Scope loop_scope{{}, scope_};
  Restore<Scope*> guard(scope_, &loop_scope);
  std::vector<Value> items;
  if (s.condition) {
    for (const auto& item : seq.items()) {
      count_steps();
      assign(*s.target, item);
      if (truthy(eval(*s.condition))) items.push_back(item);
    }
  } else {
    items = seq.items();
  }
  if (items.empty()) {
    loop_scope.vars.clear();
    exec(s.else_body, out);
    return Flow::Normal;
  }
  const std::int64_t n = std::int64_t(items.size());
  for (std::int64_t k = 0; k < n; ++k) {
    count_steps();
    loop_scope.vars.clear();  // as in Jinja2, what one iteration sets is gone in the next
    assign(*s.target, items[std::size_t(k)]);
    loop_scope.set("loop", loop_object(items, k));
    Flow f = exec(s.body, out);
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

Value Interpreter::define_macro(const Stmt& s) {
  const Stmt* macro = &s;
  return Value::callable(s.name, [macro](Interpreter& in, CallArgs& args) { return in.call_macro(*macro, args); });
}

Value Interpreter::call_macro(const Stmt& macro, CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth)
    fail("RecursionError", "macro calls nest deeper than " + std::to_string(limits_.max_call_depth));
  Restore<int> depth(call_depth_, call_depth_ + 1);
  Scope frame{{}, &root_};
  std::vector<Value> varargs;
  for (std::size_t k = 0; k < args.positional.size(); ++k) {
    if (k < macro.params.size()) frame.set(macro.params[k].first, args.positional[k]);
    else varargs.push_back(args.positional[k]);
  }
  std::vector<std::pair<Value, Value>> kwargs;
  for (auto& [key, value] : args.keyword) {
    bool known = false;
    for (const auto& p : macro.params) known = known || p.first == key;
    if (known) frame.set(key, value);
    else kwargs.emplace_back(Value::string(key), value);
  }
  Restore<Scope*> guard(scope_, &frame);
  for (const auto& [name, fallback] : macro.params) {
    bool bound = false;
    for (const auto& [k, v] : frame.vars) bound = bound || k == name;
    if (!bound) frame.set(name, fallback ? eval(*fallback) : Value::undefined(name));
  }
  frame.set("varargs", Value::make_list(std::move(varargs), ListKind::Tuple));
  frame.set("kwargs", Value::make_dict(std::move(kwargs)));
  std::string out;
  exec(macro.body, out);
  return Value::string(std::move(out));
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.type == Type::Callable) return fn.fn->fn(*this, args);
  if (fn.is_undefined()) fn.raise_undefined();
  fail("TypeError", "'" + type_name(fn) + "' object is not callable");
}

Value Interpreter::lookup(const std::string& name) {
  if (Value* v = scope_->find(name)) return *v;
  return Value::undefined(name);
}

CallArgs Interpreter::eval_args(const Expr& e, std::size_t first) {
  CallArgs args;
  for (std::size_t k = first; k < e.args.size(); ++k) args.positional.push_back(eval(*e.args[k]));
  for (const auto& [key, arg] : e.kwargs) args.keyword.emplace_back(key, eval(*arg));
  return args;
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  switch (obj.type) {
    case Type::Undefined: obj.raise_undefined();
    case Type::String:
    case Type::List:
    case Type::Dict: {
      if (is_unsafe_method(obj, name) || name.rfind("__", 0) == 0) {
        Value v = Value::undefined(name);
        auto info = std::make_shared<UndefinedInfo>(*v.undef);
        info->hint = "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.";
        info->kind = "SecurityError";
        v.undef = std::move(info);
        return v;
      }
      if (is_method(obj, name)) {
        return Value::callable(name, [obj, name](Interpreter& in, CallArgs& args) {
          return call_method(in, obj, name, args);
        });
      }
      if (obj.is_dict())
        if (const Value* v = obj.dict->find(std::string_view(name))) return *v;
      return Value::undefined_attr(obj, Value::string(name));
    }
    case Type::Namespace:
      if (Value* v = obj.ns->find(name)) return *v;
      return Value::undefined_attr(obj, Value::string(name));
    default: return Value::undefined_attr(obj, Value::string(name));
  }
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  switch (obj.type) {
    case Type::Undefined: obj.raise_undefined();
    case Type::Dict:
      if (const Value* v = obj.dict->find(key)) return *v;
      break;
    case Type::List: {
      ListKind kind = obj.list_kind();
      if ((kind == ListKind::List || kind == ListKind::Tuple || kind == ListKind::Range) &&
          (key.type == Type::Int || key.type == Type::Bool)) {
        std::int64_t n = std::int64_t(obj.items().size()), k = key.type == Type::Int ? key.i : key.b;
        if (k < 0) k += n;
        if (k >= 0 && k < n) return obj.items()[std::size_t(k)];
      }
      break;
    }
    case Type::String:
      if (key.type == Type::Int) {
        std::u32string cps = utf8_decode(obj.s);
        std::int64_t n = std::int64_t(cps.size()), k = key.i < 0 ? key.i + n : key.i;
        if (k >= 0 && k < n) return Value::string(utf8_encode(cps.substr(std::size_t(k), 1)));
      }
      break;
    case Type::Namespace:
      if (key.is_string())
        if (Value* v = obj.ns->find(key.s)) return *v;
      break;
    default: break;
  }
  if (key.is_string() && (obj.is_string() || obj.is_list() || obj.is_dict()) &&
      (is_method(obj, key.s) || is_unsafe_method(obj, key.s)))
    return getattr(obj, key.s);
  return Value::undefined_attr(obj, key);
}

Value Interpreter::eval_slice(const Expr& e) {
  Value obj = eval(*e.args[0]);
  if (obj.is_undefined()) obj.raise_undefined();
  auto bound = [&](std::size_t k) -> std::optional<std::int64_t> {
    if (!e.args[k]) return std::nullopt;
    Value v = eval(*e.args[k]);
    if (v.is_none()) return std::nullopt;
    if (v.type != Type::Int && v.type != Type::Bool)
      fail("TypeError", "slice indices must be integers or None or have an __index__ method");
    return v.type == Type::Int ? v.i : std::int64_t(v.b);
  };
  auto start = bound(1), stop = bound(2), step_opt = bound(3);
  std::int64_t step = step_opt.value_or(1);
  if (step == 0) fail("ValueError", "slice step cannot be zero");
  auto indices = [&](std::int64_t n) {
    std::vector<std::size_t> out;
    auto clamp = [&](std::optional<std::int64_t> v, std::int64_t fallback) {
      if (!v) return fallback;
      std::int64_t x = *v;
      if (x < 0) x += n;
      if (step > 0) return std::clamp<std::int64_t>(x, 0, n);
      return std::clamp<std::int64_t>(x, -1, n - 1);
    };
    std::int64_t lo = clamp(start, step > 0 ? 0 : n - 1), hi = clamp(stop, step > 0 ? n : -1);
    for (std::int64_t k = lo; step > 0 ? k < hi : k > hi; k += step) out.push_back(std::size_t(k));
    return out;
  };
  if (obj.is_string()) {
    std::u32string cps = utf8_decode(obj.s), part;
    for (std::size_t k : indices(std::int64_t(cps.size()))) part += cps[k];
    return Value::string(utf8_encode(part));
  }
  if (obj.is_list() && (obj.list_kind() == ListKind::List || obj.list_kind() == ListKind::Tuple ||
                        obj.list_kind() == ListKind::Range)) {
    std::vector<Value> part;
    for (std::size_t k : indices(std::int64_t(obj.items().size()))) part.push_back(obj.items()[k]);
    return Value::make_list(std::move(part), obj.list_kind() == ListKind::Range ? ListKind::List : obj.list_kind());
  }
  return Value::undefined_attr(obj, Value::string("slice"));
}

Value Interpreter::eval_call(const Expr& e) {
  const Expr& callee = *e.args[0];
  if (callee.kind == ExprKind::GetAttr) {
    Value obj = eval(*callee.args[0]);
    if ((obj.is_string() || obj.is_list() || obj.is_dict()) && is_method(obj, callee.name)) {
      CallArgs args = eval_args(e, 1);
      return call_method(*this, obj, callee.name, args);
    }
    Value fn = getattr(obj, callee.name);
    CallArgs args = eval_args(e, 1);
    return call(fn, args);
  }
  Value fn = eval(callee);
  CallArgs args = eval_args(e, 1);
  return call(fn, args);
}

namespace {
std::int64_t as_int(const Value& v) { return v.type == Type::Int ? v.i : std::int64_t(v.b); }
bool int_like(const Value& v) { return v.type == Type::Int || v.type == Type::Bool; }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  fail("TypeError",
       "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

std::string percent_format(const std::string& format, const Value& args) {
  std::vector<Value> values;
  if (args.is_list() && args.list_kind() == ListKind::Tuple) values = args.items();
  else values.push_back(args);
  std::string out;
  std::size_t next = 0;
  for (std::size_t k = 0; k < format.size(); ++k) {
    if (format[k] != '%') {
      out += format[k];
      continue;
    }
    if (++k >= format.size()) fail("ValueError", "incomplete format");
    char c = format[k];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) fail("TypeError", "not enough arguments for format string");
    const Value& v = values[next++];
    if (c == 's') out += to_str(v);
    else if (c == 'r') out += to_repr(v);
    else if (c == 'd' || c == 'i') {
      if (v.type == Type::Float && !(std::fabs(v.f) < 9.2e18)) fail("OverflowError", "cannot convert float to integer");
      out += std::to_string(v.type == Type::Float ? std::int64_t(v.f) : as_int(v));
    }
    else fail("ValueError", std::string("unsupported format character '") + c + "'");
  }
  if (next < values.size()) fail("TypeError", "not all arguments converted during string formatting");
  return out;
}
}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b, std::size_t max_bytes) {
  if (a.is_undefined()) a.raise_undefined();
  if (b.is_undefined()) b.raise_undefined();
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = int_like(a) && int_like(b);
  if (op == "+") {
    if (ints) {
      std::int64_t r;
      if (__builtin_add_overflow(as_int(a), as_int(b), &r)) fail("OverflowError", "integer result too large");
      return Value::integer(r);
    }
    if (numbers) return Value::real(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value::string(a.s + b.s);
    if (a.is_list() && b.is_list() && a.list_kind() == b.list_kind() &&
        (a.list_kind() == ListKind::List || a.list_kind() == ListKind::Tuple)) {
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::make_list(std::move(items), a.list_kind());
    }
    if (a.is_string() || (a.is_list() && (a.list_kind() == ListKind::List || a.list_kind() == ListKind::Tuple)))
      fail("TypeError", "can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      std::int64_t r;
      if (__builtin_sub_overflow(as_int(a), as_int(b), &r)) fail("OverflowError", "integer result too large");
      return Value::integer(r);
    }
    if (numbers) return Value::real(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      std::int64_t r;
      if (__builtin_mul_overflow(as_int(a), as_int(b), &r)) fail("OverflowError", "integer result too large");
      return Value::integer(r);
    }
    if (numbers) return Value::real(a.as_double() * b.as_double());
    const Value& seq = int_like(a) ? b : a;
    const Value& count = int_like(a) ? a : b;
    if (int_like(count) && (seq.is_string() || (seq.is_list() && seq.list_kind() == ListKind::List))) {
      std::int64_t n = std::max<std::int64_t>(0, as_int(count));
      std::size_t unit = seq.is_string() ? seq.s.size() : seq.items().size() * sizeof(Value);
      if (unit && std::uint64_t(n) > max_bytes / unit)
        fail("MemoryError", "repetition result too large");
      if (seq.is_string()) {
        std::string out;
        for (std::int64_t k = 0; k < n; ++k) out += seq.s;
        return Value::string(std::move(out));
      }
      std::vector<Value> out;
      for (std::int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.items().begin(), seq.items().end());
      return Value::make_list(std::move(out));
    }
    fail("TypeError", "can't multiply sequence by non-int of type '" + type_name(count) + "'");
  }
  if (op == "/") {
    if (!numbers) unsupported(op, a, b);
    if (b.as_double() == 0) fail("ZeroDivisionError", "division by zero");
    return Value::real(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return Value::string(percent_format(a.s, b));
    if (!numbers) unsupported(op, a, b);
    if (ints) {
      std::int64_t x = as_int(a), y = as_int(b);
      if (y == 0) fail("ZeroDivisionError", op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
      std::int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return Value::integer(op == "%" ? r : q);
    }
    double x = a.as_double(), y = b.as_double();
    if (y == 0) fail("ZeroDivisionError", op == "%" ? "float modulo" : "float floor division by zero");
    if (op == "//") return Value::real(std::floor(x / y));
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::real(r);
  }
  if (op == "**") {
    if (!numbers) unsupported(op, a, b);
    if (ints && as_int(b) >= 0) {
      std::int64_t base = as_int(a), exponent = as_int(b), r = 1;
      if (base == 0 || base == 1) return Value::integer(exponent == 0 ? 1 : base);
      if (base == -1) return Value::integer(exponent % 2 ? -1 : 1);
      for (std::int64_t k = 0; k < exponent; ++k)  // |base| >= 2 overflows within 63 steps
        if (__builtin_mul_overflow(r, base, &r)) fail("OverflowError", "integer result too large");
      return Value::integer(r);
    }
    return Value::real(std::pow(a.as_double(), b.as_double()));
  }
  fail("TemplateSyntaxError", "unknown operator " + op);
}

Value Interpreter::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and") {
    Value left = eval(*e.args[0]);
    return truthy(left) ? eval(*e.args[1]) : left;
  }
  if (op == "or") {
    Value left = eval(*e.args[0]);
    return truthy(left) ? left : eval(*e.args[1]);
  }
  Value left = eval(*e.args[0]);
  Value right = eval(*e.args[1]);
  if (op == "~") {
    std::string s = to_str(left);
    s += to_str(right);
    check_size(s.size());
    return Value::string(std::move(s));
  }
  Value r = binary_op(op, left, right, limits_.max_output_bytes);
  if (r.is_string()) check_size(r.s.size());
  if (r.is_list()) count_steps(r.items().size());
  return r;
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (std::size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.args[k + 1]);
    const std::string& op = e.ops[k];
    bool ok;
    if (op == "==") ok = equals(left, right);
    else if (op == "!=") ok = !equals(left, right);
    else if (op == "in") ok = contains(right, left);
    else if (op == "not in") ok = !contains(right, left);
    else {
      int c = compare(left, right, op);
      ok = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval(const Expr& e) {
  count_steps();
  Nest nest(depth_, limits_.max_depth);
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name: return lookup(e.name);
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::make_list(std::move(items), e.kind == ExprKind::Tuple ? ListKind::Tuple : ListKind::List);
    }
    case ExprKind::Dict: {
      std::vector<std::pair<Value, Value>> items;
      for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k]);
        Value value = eval(*e.args[k + 1]);
        bool replaced = false;
        for (auto& [existing, v] : items)
          if (equals(existing, key)) {
            v = value;
            replaced = true;
          }
        if (!replaced) items.emplace_back(std::move(key), std::move(value));
      }
      return Value::make_dict(std::move(items));
    }
    case ExprKind::GetAttr: return getattr(eval(*e.args[0]), e.name);
    case ExprKind::GetItem: {
      Value obj = eval(*e.args[0]);
      return getitem(obj, eval(*e.args[1]));
    }
    case ExprKind::Slice: return eval_slice(e);
    case ExprKind::Call: return eval_call(e);
    case ExprKind::Filter: {
      Value input = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      return apply_filter(*this, e.name, input, args);
    }
    case ExprKind::Test: {
      Value input = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      return Value::boolean(apply_test(*this, e.name, input, args) != e.negated);
    }
    case ExprKind::Unary: {
      Value v = eval(*e.args[0]);
      if (e.name == "not") return Value::boolean(!truthy(v));
      if (v.is_undefined()) v.raise_undefined();
      if (v.type == Type::Float) return Value::real(e.name == "-" ? -v.f : v.f);
      if (int_like(v)) return Value::integer(e.name == "-" ? -as_int(v) : as_int(v));
      fail("TypeError", "bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
    }
    case ExprKind::Binary: return eval_binary(e);
    case ExprKind::Compare: return eval_compare(e);
    case ExprKind::Cond:
      if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined();
  }
  return Value::undefined();
}

}  // namespace infer::chat::jinja
