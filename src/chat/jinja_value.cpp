// Python semantics for Jinja values: truthiness, equality, ordering, str(), repr() and json.dumps.
#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/utf8.h"

namespace infer::chat::jinja {

void fail(std::string_view kind, const std::string& message) {
  throw TemplateError(std::string(kind) + ": " + message);
}

std::string UndefinedInfo::message() const {
  if (!hint.empty()) return hint;
  if (owner_type.empty()) return name.empty() ? "None is undefined" : string_repr(name) + " is undefined";
  if (name_is_int) return owner_type + " has no element " + name;
  return string_repr(owner_type) + " has no attribute " + string_repr(name);
}

Value Value::undefined(std::string name) {
  Value v;
  auto info = std::make_shared<UndefinedInfo>();
  info->name = std::move(name);
  v.undef = std::move(info);
  return v;
}

Value Value::undefined_attr(const Value& owner, const Value& name) {
  Value v;
  auto info = std::make_shared<UndefinedInfo>();
  info->owner_type = object_type_repr(owner);
  if (name.type == Type::Int) {
    info->name = std::to_string(name.i);
    info->name_is_int = true;
  } else {
    info->name = to_str(name);
  }
  v.undef = std::move(info);
  return v;
}

void Value::raise_undefined() const {
  if (!undef) fail("UndefinedError", "None is undefined");
  fail(undef->kind, undef->message());
}

namespace {
int depth_of(const Value& v) {
  if (v.type == Type::List) return v.list->depth;
  if (v.type == Type::Dict) return v.dict->depth;
  return 0;
}

int checked_depth(int child_depth) {
  if (child_depth + 1 > kMaxValueDepth)
    fail("RecursionError", "values nest deeper than " + std::to_string(kMaxValueDepth) + " levels");
  return child_depth + 1;
}
}  // namespace

Value Value::make_list(std::vector<Value> items, ListKind kind) {
  Value v;
  v.type = Type::List;
  auto data = std::make_shared<ListData>();
  int child = 0;
  for (const auto& item : items) child = std::max(child, depth_of(item));
  data->depth = checked_depth(child);
  data->items = std::move(items);
  data->kind = kind;
  v.list = std::move(data);
  return v;
}

Value Value::make_dict(std::vector<std::pair<Value, Value>> items) {
  Value v;
  v.type = Type::Dict;
  auto data = std::make_shared<DictData>();
  int child = 0;
  for (const auto& [key, value] : items) child = std::max({child, depth_of(key), depth_of(value)});
  data->depth = checked_depth(child);
  data->items = std::move(items);
  v.dict = std::move(data);
  return v;
}

Value Value::callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  Value v;
  v.type = Type::Callable;
  v.fn = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return integer(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto u = j.get<std::uint64_t>();
      return u > std::uint64_t(INT64_MAX) ? real(double(u)) : integer(std::int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return real(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(string(it.key()), from_json(it.value()));
      return make_dict(std::move(items));
    }
    default: return none();
  }
}

const std::vector<Value>& Value::items() const { return list->items; }
const std::vector<std::pair<Value, Value>>& Value::entries() const { return dict->items; }
ListKind Value::list_kind() const { return list->kind; }

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.type == Type::String && k.s == key) return &v;
  return nullptr;
}

Value* NamespaceData::find(std::string_view key) {
  for (auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

const Value* CallArgs::get(std::size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

Value CallArgs::get_or(std::size_t index, std::string_view name, Value fallback) const {
  const Value* v = get(index, name);
  return v ? *v : std::move(fallback);
}

std::string type_name(const Value& v) {
  switch (v.type) {
    case Type::Undefined: return "Undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::Dict: return "dict";
    case Type::Namespace: return "Namespace";
    case Type::Callable: return "function";
    case Type::List:
      switch (v.list_kind()) {
        case ListKind::List: return "list";
        case ListKind::Tuple: return "tuple";
        case ListKind::Generator: return "generator";
        case ListKind::DictItems: return "dict_items";
        case ListKind::DictKeys: return "dict_keys";
        case ListKind::DictValues: return "dict_values";
        case ListKind::Iterator: return "list_reverseiterator";
        case ListKind::Range: return "range";
      }
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.type == Type::None) return "None";
  if (v.type == Type::Namespace) return "jinja2.utils.Namespace object";
  if (v.type == Type::Undefined) return "jinja2.runtime.Undefined object";
  return type_name(v) + " object";
}

bool truthy(const Value& v) {
  switch (v.type) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool: return v.b;
    case Type::Int: return v.i != 0;
    case Type::Float: return v.f != 0;
    case Type::String: return !v.s.empty();
    case Type::List:
      if (v.list_kind() == ListKind::Generator || v.list_kind() == ListKind::Iterator) return true;
      return !v.items().empty();
    case Type::Dict: return !v.entries().empty();
    default: return true;
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.type == Type::Float || b.type == Type::Float) return a.as_double() == b.as_double();
    return (a.type == Type::Int ? a.i : a.b) == (b.type == Type::Int ? b.i : b.b);
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case Type::Undefined:
    case Type::None: return true;
    case Type::String: return a.s == b.s;
    case Type::List: {
      if (a.list == b.list) return true;
      bool a_tuple = a.list_kind() == ListKind::Tuple, b_tuple = b.list_kind() == ListKind::Tuple;
      if (a_tuple != b_tuple) return false;
      if (a.items().size() != b.items().size()) return false;
      for (std::size_t k = 0; k < a.items().size(); ++k)
        if (!equals(a.items()[k], b.items()[k])) return false;
      return true;
    }
    case Type::Dict: {
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [k, v] : a.entries()) {
        const Value* other = b.dict->find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Type::Namespace: return a.ns == b.ns;
    case Type::Callable: return a.fn == b.fn;
    default: return false;
  }
}

int compare(const Value& a, const Value& b, std::string_view op) {
  if (a.is_undefined()) a.raise_undefined();
  if (b.is_undefined()) b.raise_undefined();
  if (a.is_number() && b.is_number()) {
    if (a.type != Type::Float && b.type != Type::Float) {
      std::int64_t x = a.type == Type::Int ? a.i : a.b, y = b.type == Type::Int ? b.i : b.b;
      return x < y ? -1 : x > y ? 1 : 0;
    }
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
  if (a.is_list() && b.is_list() && a.list_kind() == b.list_kind() &&
      (a.list_kind() == ListKind::List || a.list_kind() == ListKind::Tuple)) {
    std::size_t n = std::min(a.items().size(), b.items().size());
    for (std::size_t k = 0; k < n; ++k) {
      if (equals(a.items()[k], b.items()[k])) continue;
      return compare(a.items()[k], b.items()[k], op);
    }
    return a.items().size() < b.items().size() ? -1 : a.items().size() > b.items().size() ? 1 : 0;
  }
  fail("TypeError", "'" + std::string(op) + "' not supported between instances of '" + type_name(a) + "' and '" +
                        type_name(b) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.type) {
    case Type::Undefined: return false;
    case Type::String:
      if (!item.is_string())
        fail("TypeError", "'in <string>' requires string as left operand, not " + type_name(item));
      return container.s.find(item.s) != std::string::npos;
    case Type::List:
      for (const auto& e : container.items())
        if (equals(e, item)) return true;
      return false;
    case Type::Dict: return container.dict->find(item) != nullptr;
    case Type::Namespace: return container.ns->find(to_str(item)) != nullptr;
    default: fail("TypeError", "argument of type '" + type_name(container) + "' is not iterable");
  }
}

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  std::size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::stoi(sci.substr(e + 1));
  int decpt = exponent + 1;  // value = 0.digits * 10^decpt
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(std::size_t(-decpt), '0') + digits;
    } else if (std::size_t(decpt) >= digits.size()) {
      out += digits + std::string(std::size_t(decpt) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, std::size_t(decpt)) + "." + digits.substr(std::size_t(decpt));
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += ebuf;
  }
  return out;
}

static bool printable(char32_t c) {
  if (c < 0x20 || c == 0x7f) return false;
  if (c >= 0x80 && c <= 0xa0) return false;
  if (c == 0xad) return false;
  if ((c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x206f)) return false;
  if (c == 0x3000 || c == 0xfeff || (c >= 0xd800 && c <= 0xf8ff) || c == 0x1680) return false;
  return true;
}

std::string string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos, has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char buf[16];
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      else std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out += quote;
  return out;
}

std::string to_str(const Value& v) {
  switch (v.type) {
    case Type::Undefined: return "";
    case Type::String: return v.s;
    default: return to_repr(v);
  }
}

static std::string repr_at(const Value& v, int depth);

std::string to_repr(const Value& v) { return repr_at(v, 0); }

static std::string repr_at(const Value& v, int depth) {
  if (depth > kMaxValueDepth) fail("RecursionError", "maximum recursion depth exceeded while getting the repr of an object");
  switch (v.type) {
    case Type::Undefined: return "";
    case Type::None: return "None";
    case Type::Bool: return v.b ? "True" : "False";
    case Type::Int: return std::to_string(v.i);
    case Type::Float: return float_repr(v.f);
    case Type::String: return string_repr(v.s);
    case Type::List: {
      const char* open = "[";
      const char* close = "]";
      switch (v.list_kind()) {
        case ListKind::Tuple: open = "("; close = v.items().size() == 1 ? ",)" : ")"; break;
        case ListKind::DictKeys: open = "dict_keys(["; close = "])"; break;
        case ListKind::DictValues: open = "dict_values(["; close = "])"; break;
        case ListKind::DictItems: open = "dict_items(["; close = "])"; break;
        case ListKind::Generator: return "<generator object at 0x7f0000000000>";
        case ListKind::Iterator: return "<list_reverseiterator object at 0x7f0000000000>";
        case ListKind::Range: {
          const auto& it = v.items();
          if (it.empty()) return "range(0, 0)";
          std::int64_t step = it.size() > 1 ? it[1].i - it[0].i : 1;
          std::string r = "range(" + std::to_string(it[0].i) + ", " + std::to_string(it.back().i + step);
          return r + (step != 1 ? ", " + std::to_string(step) : "") + ")";
        }
        default: break;
      }
      std::string out = open;
      for (std::size_t k = 0; k < v.items().size(); ++k) {
        if (k) out += ", ";
        out += repr_at(v.items()[k], depth + 1);
      }
      return out + close;
    }
    case Type::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, val] : v.entries()) {
        if (!first) out += ", ";
        first = false;
        out += repr_at(k, depth + 1) + ": " + repr_at(val, depth + 1);
      }
      return out + "}";
    }
    case Type::Namespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, val] : v.ns->attrs) {
        if (!first) out += ", ";
        first = false;
        out += string_repr(k) + ": " + repr_at(val, depth + 1);
      }
      return out + "}>";
    }
    case Type::Callable: return "<function " + v.fn->name + ">";
  }
  return "";
}

void json_escape_into(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

static void json_key_into(std::string& out, const Value& key) {
  switch (key.type) {
    case Type::String: json_escape_into(out, key.s); return;
    case Type::None: out += "\"null\""; return;
    case Type::Bool: out += key.b ? "\"true\"" : "\"false\""; return;
    case Type::Int: out += "\"" + std::to_string(key.i) + "\""; return;
    case Type::Float: out += "\"" + float_repr(key.f) + "\""; return;
    default: fail("TypeError", "keys must be str, int, float, bool or None, not " + type_name(key));
  }
}

static void json_into(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  if (depth > 500) fail("RecursionError", "maximum recursion depth exceeded while encoding a JSON object");
  auto newline = [&](int level) {
    if (!o.has_indent) return;
    out += '\n';
    for (int k = 0; k < level; ++k) out += o.indent;
  };
  switch (v.type) {
    case Type::None: out += "null"; return;
    case Type::Bool: out += v.b ? "true" : "false"; return;
    case Type::Int: out += std::to_string(v.i); return;
    case Type::Float:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
      else out += float_repr(v.f);
      return;
    case Type::String: json_escape_into(out, v.s); return;
    case Type::List: {
      if (v.list_kind() != ListKind::List && v.list_kind() != ListKind::Tuple) break;
      if (v.items().empty()) { out += "[]"; return; }
      out += '[';
      newline(depth + 1);
      for (std::size_t k = 0; k < v.items().size(); ++k) {
        if (k) { out += o.item_separator; newline(depth + 1); }
        json_into(out, v.items()[k], o, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Type::Dict: {
      if (v.entries().empty()) { out += "{}"; return; }
      std::vector<const std::pair<Value, Value>*> order;
      for (const auto& e : v.entries()) order.push_back(&e);
      if (o.sort_keys)
        std::stable_sort(order.begin(), order.end(),
                         [](auto* x, auto* y) { return compare(x->first, y->first, "<") < 0; });
      out += '{';
      newline(depth + 1);
      bool first = true;
      for (const auto* e : order) {
        if (!first) { out += o.item_separator; newline(depth + 1); }
        first = false;
        json_key_into(out, e->first);
        out += o.key_separator;
        json_into(out, e->second, o, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default: break;
  }
  fail("TypeError", "Object of type " + type_name(v) + " is not JSON serializable");
}

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  json_into(out, v, options, 0);
  return out;
}

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t k = 0; k < s.size();) {
    unsigned char c = s[k];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || k + len > s.size()) {
      out += char32_t(0xfffd);
      ++k;
      continue;
    }
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (int m = 1; m < len; ++m) cp = (cp << 6) | (static_cast<unsigned char>(s[k + m]) & 0x3f);
    out += cp;
    k += std::size_t(len);
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) { tokenizer::utf8::append(out, uint32_t(c)); }

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

}  // namespace infer::chat::jinja
