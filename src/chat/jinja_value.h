// Values of the Jinja interpreter, with Python's semantics: None, bool, int, float, str, list (and the
// list-like tuple, generator and dict views, which print and serialise differently), dict (insertion
// ordered), namespace, callables, and Jinja's Undefined. Containers are shared and never mutated once
// built (the immutable sandbox); a namespace is the one mutable object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace infer::chat::jinja {

// A failure with Jinja2's exception name as the prefix: "UndefinedError: 'x' is undefined".
[[noreturn]] void fail(std::string_view kind, const std::string& message);

struct Value;
struct ListData;
struct DictData;
struct NamespaceData;
struct Callable;
class Interpreter;

// Why a value is undefined: Jinja's message is built from these when the value is used.
struct UndefinedInfo {
  std::string name;        // the missing variable, attribute or key
  std::string owner_type;  // "dict object", "None", ...; empty: a missing variable
  bool name_is_int = false;
  std::string hint;        // overrides the message (e.g. the sandbox's)
  std::string kind = "UndefinedError";
  std::string message() const;
};

enum class Type { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

// Python's names for list-like objects: they print and serialise differently.
enum class ListKind { List, Tuple, Generator, DictItems, DictKeys, DictValues, Iterator, Range };

struct Value {
  Type type = Type::Undefined;
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<const UndefinedInfo> undef;
  std::shared_ptr<const ListData> list;
  std::shared_ptr<const DictData> dict;
  std::shared_ptr<NamespaceData> ns;
  std::shared_ptr<const Callable> fn;

  Value() = default;
  static Value undefined(std::string name = {});
  static Value undefined_attr(const Value& owner, const Value& name);
  static Value none() { Value v; v.type = Type::None; return v; }
  static Value boolean(bool x) { Value v; v.type = Type::Bool; v.b = x; return v; }
  static Value integer(std::int64_t x) { Value v; v.type = Type::Int; v.i = x; return v; }
  static Value real(double x) { Value v; v.type = Type::Float; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.type = Type::String; v.s = std::move(x); return v; }
  static Value make_list(std::vector<Value> items, ListKind kind = ListKind::List);
  static Value make_dict(std::vector<std::pair<Value, Value>> items);
  static Value callable(std::string name, std::function<Value(Interpreter&, struct CallArgs&)> fn);
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return type == Type::Undefined; }
  bool is_none() const { return type == Type::None; }
  bool is_string() const { return type == Type::String; }
  bool is_number() const { return type == Type::Int || type == Type::Float || type == Type::Bool; }
  bool is_list() const { return type == Type::List; }
  bool is_dict() const { return type == Type::Dict; }
  const std::vector<Value>& items() const;                      // a list's elements
  const std::vector<std::pair<Value, Value>>& entries() const;  // a dict's pairs
  ListKind list_kind() const;
  double as_double() const { return type == Type::Float ? f : type == Type::Int ? double(i) : double(b); }

  [[noreturn]] void raise_undefined() const;  // throws this undefined value's error
  void check_defined() const { if (type == Type::Undefined) raise_undefined(); }
};

// Containers nest at most this deep, so that printing, comparing and freeing them cannot exhaust the stack.
constexpr int kMaxValueDepth = 512;

struct ListData {
  std::vector<Value> items;
  ListKind kind = ListKind::List;
  int depth = 1;
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
};

struct NamespaceData {
  std::vector<std::pair<std::string, Value>> attrs;
  Value* find(std::string_view key);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at `index` or named `name`, else `fallback` (a Python signature's default).
  const Value* get(std::size_t index, std::string_view name) const;
  Value get_or(std::size_t index, std::string_view name, Value fallback) const;
};

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

// Python's type(x).__name__ ("str", "dict", "NoneType", "generator", ...).
std::string type_name(const Value& v);
// object_type_repr: "dict object", "None", ...
std::string object_type_repr(const Value& v);

bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// Python's ordering; throws TypeError for unordered types. `op` names the operator in that message.
int compare(const Value& a, const Value& b, std::string_view op);
bool contains(const Value& container, const Value& item);

std::string to_str(const Value& v);   // Python str(); "" for undefined
std::string to_repr(const Value& v);  // Python repr()
std::string float_repr(double x);
std::string string_repr(std::string_view s);

struct JsonOptions {
  std::string indent;  // empty with has_indent=false: one line
  bool has_indent = false;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// json.dumps(v, ensure_ascii=False, ...); TypeError for values JSON cannot hold.
std::string to_json(const Value& v, const JsonOptions& options);
void json_escape_into(std::string& out, std::string_view s);

// UTF-8 helpers: Python indexes strings by code point.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
std::size_t utf8_length(std::string_view s);

}  // namespace infer::chat::jinja
