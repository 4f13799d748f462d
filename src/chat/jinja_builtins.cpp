// Jinja2's filters and tests, Python's str/dict/list methods, and the globals chat templates call.
#include "chat/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <unordered_map>

#include "chat/jinja_interpreter.h"

namespace infer::chat::jinja {
namespace {

bool is_ws(char32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

char32_t lower_cp(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3a9) || (c >= 0x410 && c <= 0x42f)) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

char32_t upper_cp(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) || (c >= 0x430 && c <= 0x44f)) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

bool is_cased_letter(char32_t c) { return lower_cp(c) != c || upper_cp(c) != c; }
bool is_alpha(char32_t c) { return (c < 0x80 && std::isalpha(int(c))) || (c >= 0x80 && is_cased_letter(c)) || (c >= 0x3040 && c < 0xa000); }
bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }

std::string map_cps(std::string_view s, char32_t (*f)(char32_t)) {
  std::string out;
  for (char32_t c : utf8_decode(s)) utf8_append(out, f(c));
  return out;
}

const std::string& str_arg(const Value& v, const char* what) {
  if (!v.is_string()) fail("TypeError", std::string(what) + " must be str, not " + type_name(v));
  return v.s;
}

std::int64_t int_arg(const Value& v, const char* what) {
  if (v.type == Type::Int) return v.i;
  if (v.type == Type::Bool) return v.b;
  fail("TypeError", std::string(what) + ": '" + type_name(v) + "' object cannot be interpreted as an integer");
}

std::size_t py_len(const Value& v) {
  switch (v.type) {
    case Type::Undefined: return 0;
    case Type::String: return utf8_length(v.s);
    case Type::Dict: return v.entries().size();
    case Type::List:
      if (v.list_kind() != ListKind::Generator && v.list_kind() != ListKind::Iterator) return v.items().size();
      break;
    case Type::Namespace: break;
    default: break;
  }
  fail("TypeError", "object of type '" + type_name(v) + "' has no len()");
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, std::int64_t count) {
  if (from.empty()) {
    std::string out;
    std::int64_t done = 0;
    auto cps = utf8_decode(s);
    if (count < 0 || done < count) { out += to; ++done; }
    for (char32_t c : cps) {
      utf8_append(out, c);
      if (count < 0 || done < count) { out += to; ++done; }
    }
    return out;
  }
  std::string out;
  std::size_t pos = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    std::size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  std::u32string cps = utf8_decode(s), line;
  for (std::size_t k = 0; k < cps.size(); ++k) {
    char32_t c = cps[k];
    bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
               c == 0x2028 || c == 0x2029;
    if (!brk) {
      line += c;
      continue;
    }
    std::u32string end(1, c);
    if (c == '\r' && k + 1 < cps.size() && cps[k + 1] == '\n') {
      end += U'\n';
      ++k;
    }
    lines.push_back(utf8_encode(keepends ? line + end : line));
    line.clear();
  }
  if (!line.empty()) lines.push_back(utf8_encode(line));
  return lines;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : utf8_decode(s)) {
    utf8_append(out, prev_cased ? lower_cp(c) : upper_cp(c));
    prev_cased = is_cased_letter(c);
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t c : utf8_decode(s)) {
    utf8_append(out, first ? upper_cp(c) : lower_cp(c));
    first = false;
  }
  return out;
}

// Jinja's `title` filter: capitalise after spaces, hyphens and opening brackets.
std::string jinja_title(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (char32_t c : utf8_decode(s)) {
    bool separator = is_ws(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    utf8_append(out, separator ? c : word_start ? upper_cp(c) : lower_cp(c));
    word_start = separator;
  }
  return out;
}

std::string py_format(Interpreter&, const std::string& fmt, const CallArgs& args) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t k = 0; k < fmt.size(); ++k) {
    char c = fmt[k];
    if (c == '}') {
      if (k + 1 < fmt.size() && fmt[k + 1] == '}') ++k;
      else fail("ValueError", "Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
      continue;
    }
    std::size_t close = fmt.find('}', k);
    if (close == std::string::npos) fail("ValueError", "Single '{' encountered in format string");
    std::string field = fmt.substr(k + 1, close - k - 1);
    std::size_t colon = field.find_first_of(":!");
    std::string key = field.substr(0, colon);
    const Value* v = nullptr;
    if (key.empty()) {
      v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
      if (!v) fail("IndexError", "Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
      ++auto_index;
    } else if (std::all_of(key.begin(), key.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      std::size_t index = std::stoul(key);
      if (index >= args.positional.size())
        fail("IndexError", "Replacement index " + key + " out of range for positional args tuple");
      v = &args.positional[index];
    } else {
      for (const auto& [name, value] : args.keyword)
        if (name == key) v = &value;
      if (!v) fail("KeyError", string_repr(key));
    }
    out += colon != std::string::npos && field[colon] == '!' && field.compare(colon, 2, "!r") == 0 ? to_repr(*v) : to_str(*v);
    k = close;
  }
  return out;
}

// `attribute` may be dotted ("function.name"); numeric parts index lists.
Value attribute_of(Interpreter& in, Value item, const std::string& attribute) {
  std::size_t start = 0;
  while (true) {
    std::size_t dot = attribute.find('.', start);
    std::string part = attribute.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    item = in.getitem(item, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return item;
    start = dot + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  return v.is_string() && !case_sensitive ? Value::string(py_lower(v.s)) : v;
}

Value list_of(Interpreter& in, const Value& v) {
  Value seq = in.iterate(v);
  return Value::make_list(seq.items());
}

std::vector<Value> select_items(Interpreter& in, const Value& seq, const CallArgs& args, bool by_attr, bool select) {
  std::vector<Value> out;
  std::string attribute;
  std::size_t test_at = 0;
  if (by_attr) {
    if (args.positional.empty()) fail("TypeError", "selectattr needs an attribute");
    attribute = to_str(args.positional[0]);
    test_at = 1;
  }
  std::string test = test_at < args.positional.size() ? to_str(args.positional[test_at]) : "";
  CallArgs test_args;
  for (std::size_t k = test_at + 1; k < args.positional.size(); ++k) test_args.positional.push_back(args.positional[k]);
  test_args.keyword = args.keyword;
  for (const Value iterated = in.iterate(seq); const Value& item : iterated.items()) {
    in.count_steps();
    Value subject = by_attr ? attribute_of(in, item, attribute) : item;
    bool ok = test.empty() ? truthy(subject) : apply_test(in, test, subject, test_args);
    if (ok == select) out.push_back(item);
  }
  return out;
}

Value do_tojson(const Value& v, const CallArgs& args) {
  JsonOptions o;
  Value indent = args.get_or(0, "indent", Value::none());
  if (indent.type == Type::Int) {
    o.has_indent = true;
    o.indent = std::string(std::size_t(std::max<std::int64_t>(0, std::min<std::int64_t>(indent.i, 1000))), ' ');
  } else if (indent.is_string()) {
    o.has_indent = true;
    o.indent = indent.s;
  }
  if (o.has_indent) o.item_separator = ",";
  Value separators = args.get_or(1, "separators", Value::none());
  if (separators.is_list() && separators.items().size() == 2) {
    o.item_separator = to_str(separators.items()[0]);
    o.key_separator = to_str(separators.items()[1]);
  }
  o.sort_keys = truthy(args.get_or(2, "sort_keys", Value::boolean(false)));
  return Value::string(to_json(v, o));
}

Value do_indent(const Value& v, const CallArgs& args) {
  Value width = args.get_or(0, "width", Value::integer(4));
  std::string indention = width.is_string() ? width.s : std::string(std::size_t(std::clamp<std::int64_t>(width.type == Type::Int ? width.i : 4, 0, 1000)), ' ');
  bool first = truthy(args.get_or(1, "first", Value::boolean(false)));
  bool blank = truthy(args.get_or(2, "blank", Value::boolean(false)));
  std::string s = to_str(v) + "\n";
  std::vector<std::string> lines = splitlines(s, false);
  std::string rv;
  if (blank) {
    for (std::size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + indention : "") + lines[k];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (std::size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : indention + lines[k]);
  }
  return Value::string(first ? indention + rv : rv);
}

Value to_int(const Value& v, const Value& fallback, std::int64_t base) {
  switch (v.type) {
    case Type::Int: return v;
    case Type::Bool: return Value::integer(v.b);
    case Type::Float:
      if (!std::isfinite(v.f)) return fallback;
      if (std::fabs(v.f) >= 9.2e18) fail("OverflowError", "int too large to convert");
      return Value::integer(std::int64_t(v.f));
    case Type::String: {
      std::string s = py_strip(v.s, Value::none(), true, true);
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      try {
        std::size_t used = 0;
        long long n = std::stoll(s, &used, int(base));
        if (used == s.size()) return Value::integer(n);
        double d = std::stod(s, &used);
        if (used == s.size() && std::fabs(d) < 9.2e18) return Value::integer(std::int64_t(d));
      } catch (const std::exception&) {
      }
      return fallback;
    }
    default: return fallback;
  }
}

Value to_float(const Value& v, const Value& fallback) {
  switch (v.type) {
    case Type::Int: return Value::real(double(v.i));
    case Type::Bool: return Value::real(v.b);
    case Type::Float: return v;
    case Type::String: {
      std::string s = py_strip(v.s, Value::none(), true, true);
      try {
        std::size_t used = 0;
        double d = std::stod(s, &used);
        if (used == s.size()) return Value::real(d);
      } catch (const std::exception&) {
      }
      return fallback;
    }
    default: return fallback;
  }
}

Value min_max(Interpreter& in, const Value& v, const CallArgs& args, bool want_max) {
  bool case_sensitive = truthy(args.get_or(0, "case_sensitive", Value::boolean(false)));
  Value attribute = args.get_or(1, "attribute", Value::none());
  const Value* best = nullptr;
  Value best_key;
  Value seq = in.iterate(v);
  for (const Value& item : seq.items()) {
    Value key = sort_key(attribute.is_none() ? item : attribute_of(in, item, to_str(attribute)), case_sensitive);
    if (!best || compare(key, best_key, want_max ? ">" : "<") * (want_max ? 1 : -1) > 0) {
      best = &item;
      best_key = key;
    }
  }
  if (!best) {
    Value u = Value::undefined();
    auto info = std::make_shared<UndefinedInfo>(*u.undef);
    info->hint = "No aggregated item, sequence was empty.";
    u.undef = info;
    return u;
  }
  return *best;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

using FilterFn = Value (*)(Interpreter&, const Value&, const CallArgs&);

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"tojson", [](Interpreter&, const Value& v, const CallArgs& a) { return do_tojson(v, a); }},
      {"length", [](Interpreter&, const Value& v, const CallArgs&) { return Value::integer(std::int64_t(py_len(v))); }},
      {"count", [](Interpreter&, const Value& v, const CallArgs&) { return Value::integer(std::int64_t(py_len(v))); }},
      {"trim", [](Interpreter&, const Value& v, const CallArgs& a) {
         return Value::string(py_strip(to_str(v), a.get_or(0, "chars", Value::none()), true, true));
       }},
      {"string", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_string() ? v : Value::string(to_str(v)); }},
      {"safe", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_string() ? v : Value::string(to_str(v)); }},
      {"escape", [](Interpreter&, const Value& v, const CallArgs&) { return Value::string(html_escape(to_str(v))); }},
      {"e", [](Interpreter&, const Value& v, const CallArgs&) { return Value::string(html_escape(to_str(v))); }},
      {"upper", [](Interpreter&, const Value& v, const CallArgs&) { return Value::string(py_upper(to_str(v))); }},
      {"lower", [](Interpreter&, const Value& v, const CallArgs&) { return Value::string(py_lower(to_str(v))); }},
      {"title", [](Interpreter&, const Value& v, const CallArgs&) { return Value::string(jinja_title(to_str(v))); }},
      {"capitalize", [](Interpreter&, const Value& v, const CallArgs&) { return Value::string(py_capitalize(to_str(v))); }},
      {"default", [](Interpreter&, const Value& v, const CallArgs& a) {
         bool boolean = truthy(a.get_or(1, "boolean", Value::boolean(false)));
         if (v.is_undefined() || (boolean && !truthy(v))) return a.get_or(0, "default_value", Value::string(""));
         return v;
       }},
      {"join", [](Interpreter& in, const Value& v, const CallArgs& a) {
         std::string sep = to_str(a.get_or(0, "d", Value::string("")));
         Value attribute = a.get_or(1, "attribute", Value::none());
         std::string out;
         bool first = true;
         for (const Value iterated = in.iterate(v); const Value& item : iterated.items()) {
           if (!first) out += sep;
           first = false;
           out += to_str(attribute.is_none() ? item : attribute_of(in, item, to_str(attribute)));
           in.check_size(out.size());
         }
         return Value::string(std::move(out));
       }},
      {"items", [](Interpreter&, const Value& v, const CallArgs&) {
         if (v.is_undefined()) return Value::make_list({}, ListKind::Generator);
         if (!v.is_dict()) fail("TypeError", "Can only get item pairs from a mapping.");
         std::vector<Value> pairs;
         for (const auto& [k, val] : v.entries()) pairs.push_back(Value::make_list({k, val}, ListKind::Tuple));
         return Value::make_list(std::move(pairs), ListKind::Generator);
       }},
      {"dictsort", [](Interpreter&, const Value& v, const CallArgs& a) {
         if (!v.is_dict()) fail("TypeError", "dictsort requires a mapping");
         bool case_sensitive = truthy(a.get_or(0, "case_sensitive", Value::boolean(false)));
         std::string by = to_str(a.get_or(1, "by", Value::string("key")));
         bool reverse = truthy(a.get_or(2, "reverse", Value::boolean(false)));
         std::vector<Value> pairs;
         for (const auto& [k, val] : v.entries()) pairs.push_back(Value::make_list({k, val}, ListKind::Tuple));
         std::size_t pos = by == "value" ? 1 : 0;
         std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
           int c = compare(sort_key(x.items()[pos], case_sensitive), sort_key(y.items()[pos], case_sensitive), "<");
           return reverse ? c > 0 : c < 0;
         });
         return Value::make_list(std::move(pairs));
       }},
      {"replace", [](Interpreter& in, const Value& v, const CallArgs& a) {
         Value count = a.get_or(2, "count", Value::none());
         std::string r = replace_all(to_str(v), to_str(a.get_or(0, "old", Value::string(""))),
                                     to_str(a.get_or(1, "new", Value::string(""))), count.type == Type::Int ? count.i : -1);
         in.check_size(r.size());
         return Value::string(std::move(r));
       }},
      {"list", [](Interpreter& in, const Value& v, const CallArgs&) { return list_of(in, v); }},
      {"first", [](Interpreter& in, const Value& v, const CallArgs&) {
         Value seq = in.iterate(v);
         if (seq.items().empty()) {
           Value u = Value::undefined();
           auto info = std::make_shared<UndefinedInfo>(*u.undef);
           info->hint = "No first item, sequence was empty.";
           u.undef = info;
           return u;
         }
         return seq.items().front();
       }},
      {"last", [](Interpreter& in, const Value& v, const CallArgs&) {
         if (v.is_list() && (v.list_kind() == ListKind::Generator || v.list_kind() == ListKind::Iterator))
           fail("TypeError", "'" + type_name(v) + "' object is not reversible");
         Value seq = in.iterate(v);
         if (seq.items().empty()) {
           Value u = Value::undefined();
           auto info = std::make_shared<UndefinedInfo>(*u.undef);
           info->hint = "No last item, sequence was empty.";
           u.undef = info;
           return u;
         }
         return seq.items().back();
       }},
      {"reverse", [](Interpreter& in, const Value& v, const CallArgs&) {
         if (v.is_string()) {
           std::u32string cps = utf8_decode(v.s);
           std::reverse(cps.begin(), cps.end());
           return Value::string(utf8_encode(cps));
         }
         std::vector<Value> items = in.iterate(v).items();
         std::reverse(items.begin(), items.end());
         return Value::make_list(std::move(items), ListKind::Iterator);
       }},
      {"selectattr", [](Interpreter& in, const Value& v, const CallArgs& a) {
         return Value::make_list(select_items(in, v, a, true, true), ListKind::Generator);
       }},
      {"rejectattr", [](Interpreter& in, const Value& v, const CallArgs& a) {
         return Value::make_list(select_items(in, v, a, true, false), ListKind::Generator);
       }},
      {"select", [](Interpreter& in, const Value& v, const CallArgs& a) {
         return Value::make_list(select_items(in, v, a, false, true), ListKind::Generator);
       }},
      {"reject", [](Interpreter& in, const Value& v, const CallArgs& a) {
         return Value::make_list(select_items(in, v, a, false, false), ListKind::Generator);
       }},
      {"map", [](Interpreter& in, const Value& v, const CallArgs& a) {
         std::vector<Value> out;
         const Value* attribute = a.get(std::size_t(-1), "attribute");
         Value seq = in.iterate(v);
         if (attribute) {
           const Value* fallback = a.get(std::size_t(-1), "default");
           for (const Value& item : seq.items()) {
             Value r = attribute_of(in, item, to_str(*attribute));
             out.push_back(r.is_undefined() && fallback ? *fallback : r);
           }
         } else {
           if (a.positional.empty()) fail("FilterArgumentError", "map requires a filter argument");
           std::string filter = to_str(a.positional[0]);
           CallArgs rest;
           rest.positional.assign(a.positional.begin() + 1, a.positional.end());
           rest.keyword = a.keyword;
           for (const Value& item : seq.items()) out.push_back(apply_filter(in, filter, item, rest));
         }
         return Value::make_list(std::move(out), ListKind::Generator);
       }},
      {"indent", [](Interpreter&, const Value& v, const CallArgs& a) { return do_indent(v, a); }},
      {"int", [](Interpreter&, const Value& v, const CallArgs& a) {
         return to_int(v, a.get_or(0, "default", Value::integer(0)), a.get_or(1, "base", Value::integer(10)).i);
       }},
      {"float", [](Interpreter&, const Value& v, const CallArgs& a) {
         return to_float(v, a.get_or(0, "default", Value::real(0)));
       }},
      {"abs", [](Interpreter&, const Value& v, const CallArgs&) {
         if (v.type == Type::Float) return Value::real(std::fabs(v.f));
         if (v.type == Type::Int) return Value::integer(v.i < 0 ? -v.i : v.i);
         if (v.type == Type::Bool) return Value::integer(v.b);
         fail("TypeError", "bad operand type for abs(): '" + type_name(v) + "'");
       }},
      {"round", [](Interpreter&, const Value& v, const CallArgs& a) {
         if (!v.is_number()) fail("TypeError", "type " + type_name(v) + " doesn't define __round__ method");
         double p = std::pow(10.0, double(a.get_or(0, "precision", Value::integer(0)).i));
         std::string method = to_str(a.get_or(1, "method", Value::string("common")));
         if (method == "common" && v.type == Type::Int) return v;  // Python's round(int, n) stays an int
         double x = v.as_double() * p;
         double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::nearbyint(x);
         return Value::real(r / p);
       }},
      {"unique", [](Interpreter& in, const Value& v, const CallArgs& a) {
         bool case_sensitive = truthy(a.get_or(0, "case_sensitive", Value::boolean(false)));
         Value attribute = a.get_or(1, "attribute", Value::none());
         std::vector<Value> out, seen;
         for (const Value iterated = in.iterate(v); const Value& item : iterated.items()) {
           Value key = sort_key(attribute.is_none() ? item : attribute_of(in, item, to_str(attribute)), case_sensitive);
           bool dup = false;
           for (const Value& s : seen) dup = dup || equals(s, key);
           if (dup) continue;
           seen.push_back(key);
           out.push_back(item);
         }
         return Value::make_list(std::move(out), ListKind::Generator);
       }},
      {"sort", [](Interpreter& in, const Value& v, const CallArgs& a) {
         bool reverse = truthy(a.get_or(0, "reverse", Value::boolean(false)));
         bool case_sensitive = truthy(a.get_or(1, "case_sensitive", Value::boolean(false)));
         Value attribute = a.get_or(2, "attribute", Value::none());
         std::vector<Value> items = in.iterate(v).items();
         std::vector<std::pair<Value, Value>> keyed;
         for (const Value& item : items)
           keyed.emplace_back(sort_key(attribute.is_none() ? item : attribute_of(in, item, to_str(attribute)), case_sensitive), item);
         std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
           int c = compare(x.first, y.first, "<");
           return reverse ? c > 0 : c < 0;
         });
         std::vector<Value> out;
         for (auto& [k, item] : keyed) out.push_back(std::move(item));
         return Value::make_list(std::move(out));
       }},
      {"min", [](Interpreter& in, const Value& v, const CallArgs& a) { return min_max(in, v, a, false); }},
      {"max", [](Interpreter& in, const Value& v, const CallArgs& a) { return min_max(in, v, a, true); }},
      {"sum", [](Interpreter& in, const Value& v, const CallArgs& a) {
         Value attribute = a.get_or(0, "attribute", Value::none());
         Value total = a.get_or(1, "start", Value::integer(0));
         for (const Value iterated = in.iterate(v); const Value& item : iterated.items())
           total = binary_op("+", total, attribute.is_none() ? item : attribute_of(in, item, to_str(attribute)));
         return total;
       }},
      {"wordcount", [](Interpreter&, const Value& v, const CallArgs&) {
         std::int64_t words = 0;
         bool in_word = false;
         for (char32_t c : utf8_decode(to_str(v))) {
           bool w = is_alpha(c) || is_digit(c) || c == '_';
           if (w && !in_word) ++words;
           in_word = w;
         }
         return Value::integer(words);
       }},
      {"attr", [](Interpreter& in, const Value& v, const CallArgs& a) {
         return in.getattr(v, to_str(a.get_or(0, "name", Value::string(""))));
       }},
      {"center", [](Interpreter&, const Value& v, const CallArgs& a) {
         std::string s = to_str(v);
         std::int64_t width = std::min<std::int64_t>(a.get_or(0, "width", Value::integer(80)).i, 1 << 20);
         std::int64_t n = std::int64_t(utf8_length(s));
         if (width <= n) return Value::string(s);
         std::int64_t pad = width - n, left = pad / 2 + (pad & width & 1);
         return Value::string(std::string(std::size_t(left), ' ') + s + std::string(std::size_t(pad - left), ' '));
       }},
  };
  return table;
}

bool is_int(const Value& v) { return v.type == Type::Int; }

}  // namespace

std::string py_lower(std::string_view s) { return map_cps(s, lower_cp); }
std::string py_upper(std::string_view s) { return map_cps(s, upper_cp); }

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right) {
  std::u32string cps = utf8_decode(s), set;
  bool whitespace = chars.is_none() || chars.is_undefined();
  if (!whitespace) set = utf8_decode(str_arg(chars, "strip arg"));
  auto strip_it = [&](char32_t c) { return whitespace ? is_ws(c) : set.find(c) != std::u32string::npos; };
  std::size_t lo = 0, hi = cps.size();
  if (left) while (lo < hi && strip_it(cps[lo])) ++lo;
  if (right) while (hi > lo && strip_it(cps[hi - 1])) --hi;
  return utf8_encode(std::u32string_view(cps).substr(lo, hi - lo));
}

std::vector<std::string> py_split(std::string_view s, const Value& sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    std::u32string cps = utf8_decode(s);
    std::size_t k = 0;
    while (true) {
      while (k < cps.size() && is_ws(cps[k])) ++k;
      if (k >= cps.size()) break;
      if (maxsplit >= 0 && std::int64_t(out.size()) == maxsplit) {
        std::size_t end = cps.size();
        while (end > k && is_ws(cps[end - 1])) --end;
        out.push_back(utf8_encode(cps.substr(k, end - k)));
        break;
      }
      std::size_t start = k;
      while (k < cps.size() && !is_ws(cps[k])) ++k;
      out.push_back(utf8_encode(cps.substr(start, k - start)));
    }
    return out;
  }
  const std::string& d = str_arg(sep, "sep");
  if (d.empty()) fail("ValueError", "empty separator");
  std::size_t pos = 0;
  while (maxsplit < 0 || std::int64_t(out.size()) < maxsplit) {
    std::size_t hit = s.find(d, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args) {
  in.count_steps();
  const auto& table = filters();
  auto it = table.find(name == "d" ? "default" : name);
  if (it == table.end()) fail("TemplateRuntimeError", "No filter named '" + name + "' found.");
  return it->second(in, input, args);
}

bool apply_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  in.count_steps();
  auto arg = [&](std::size_t k) -> const Value& {
    if (k >= args.positional.size()) fail("TypeError", "test '" + name + "' is missing an argument");
    return args.positional[k];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.type == Type::Int;
  if (name == "float") return v.type == Type::Float;
  if (name == "boolean") return v.type == Type::Bool;
  if (name == "true") return v.type == Type::Bool && v.b;
  if (name == "false") return v.type == Type::Bool && !v.b;
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence")
    return v.is_string() || v.is_dict() ||
           (v.is_list() && v.list_kind() != ListKind::Generator && v.list_kind() != ListKind::Iterator);
  if (name == "callable") return v.type == Type::Callable;
  if (name == "odd" || name == "even") {
    if (v.is_undefined()) v.raise_undefined();
    if (!is_int(v) && v.type != Type::Bool) fail("TypeError", "not all arguments converted during string formatting");
    std::int64_t x = v.type == Type::Int ? v.i : v.b;
    return (x % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    Value r = binary_op("%", v, arg(0));
    return !truthy(r);
  }
  if (name == "equalto" || name == "eq" || name == "==") return equals(v, arg(0));
  if (name == "ne" || name == "!=") return !equals(v, arg(0));
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, arg(0), "<") < 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, arg(0), ">") > 0;
  if (name == "le" || name == "<=") return compare(v, arg(0), "<=") <= 0;
  if (name == "ge" || name == ">=") return compare(v, arg(0), ">=") >= 0;
  if (name == "in") return contains(arg(0), v);
  if (name == "sameas") {
    const Value& o = arg(0);
    if (v.type != o.type) return false;
    switch (v.type) {
      case Type::None:
      case Type::Undefined: return true;
      case Type::Bool: return v.b == o.b;
      case Type::Int: return v.i == o.i && v.i >= -5 && v.i <= 256;
      case Type::List: return v.list == o.list;
      case Type::Dict: return v.dict == o.dict;
      case Type::Namespace: return v.ns == o.ns;
      default: return false;
    }
  }
  if (name == "lower" || name == "upper") {
    std::string s = to_str(v);
    bool cased = false;
    for (char32_t c : utf8_decode(s)) {
      if (!is_cased_letter(c)) continue;
      cased = true;
      if ((name == "lower") != (lower_cp(c) == c)) return false;
    }
    return cased;
  }
  if (name == "escaped") return false;
  fail("TemplateRuntimeError", "No test named '" + name + "' found.");
}

bool is_unsafe_method(const Value& obj, std::string_view name) {
  static const char* list_mutators[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
  static const char* dict_mutators[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (obj.is_list() && obj.list_kind() == ListKind::List) {
    for (const char* m : list_mutators)
      if (name == m) return true;
  } else if (obj.is_dict()) {
    for (const char* m : dict_mutators)
      if (name == m) return true;
  }
  return false;
}

bool is_method(const Value& obj, std::string_view name) {
  static const char* str_methods[] = {
      "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "upper", "lower",
      "title", "capitalize", "find", "rfind", "index", "rindex", "count", "format", "join", "splitlines",
      "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal", "removeprefix",
      "removesuffix", "center", "ljust", "rjust", "partition", "rpartition", "zfill", "swapcase", "casefold",
      "istitle", "expandtabs", "encode"};
  static const char* dict_methods[] = {"get", "items", "keys", "values", "copy"};
  static const char* list_methods[] = {"index", "count", "copy"};
  if (obj.is_string()) {
    for (const char* m : str_methods)
      if (name == m) return true;
  } else if (obj.is_dict()) {
    for (const char* m : dict_methods)
      if (name == m) return true;
  } else if (obj.is_list() && (obj.list_kind() == ListKind::List || obj.list_kind() == ListKind::Tuple)) {
    for (const char* m : list_methods)
      if (name == m) return true;
  }
  return false;
}

namespace {

Value str_method(Interpreter& in, const std::string& s, const std::string& name, const CallArgs& a) {
  auto pos_arg = [&](std::size_t k, const char* what) -> const Value& {
    if (k >= a.positional.size()) fail("TypeError", name + "() missing required argument: '" + what + "'");
    return a.positional[k];
  };
  if (name == "strip") return Value::string(py_strip(s, a.get_or(0, "chars", Value::none()), true, true));
  if (name == "lstrip") return Value::string(py_strip(s, a.get_or(0, "chars", Value::none()), true, false));
  if (name == "rstrip") return Value::string(py_strip(s, a.get_or(0, "chars", Value::none()), false, true));
  if (name == "split" || name == "rsplit") {
    Value sep = a.get_or(0, "sep", Value::none());
    std::int64_t maxsplit = int_arg(a.get_or(1, "maxsplit", Value::integer(-1)), "maxsplit");
    std::vector<std::string> parts;
    if (name == "rsplit" && maxsplit >= 0) {
      // Split the reversed string with the reversed separator, then reverse back.
      std::u32string rev = utf8_decode(s);
      std::reverse(rev.begin(), rev.end());
      Value rsep = sep;
      if (sep.is_string()) {
        std::u32string d = utf8_decode(sep.s);
        std::reverse(d.begin(), d.end());
        rsep = Value::string(utf8_encode(d));
      }
      parts = py_split(utf8_encode(rev), rsep, maxsplit);
      for (auto& p : parts) {
        std::u32string c = utf8_decode(p);
        std::reverse(c.begin(), c.end());
        p = utf8_encode(c);
      }
      std::reverse(parts.begin(), parts.end());
    } else {
      parts = py_split(s, sep, maxsplit);
    }
    std::vector<Value> out;
    for (auto& p : parts) out.push_back(Value::string(std::move(p)));
    in.count_steps(out.size());
    return Value::make_list(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    const Value& prefix = pos_arg(0, "prefix");
    std::vector<std::string> options;
    if (prefix.is_list() && prefix.list_kind() == ListKind::Tuple) {
      for (const Value& p : prefix.items()) options.push_back(str_arg(p, "tuple for startswith"));
    } else if (prefix.is_string()) {
      options.push_back(prefix.s);
    } else {
      fail("TypeError", name + " first arg must be str or a tuple of str, not " + type_name(prefix));
    }
    for (const auto& p : options) {
      if (name == "startswith" ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                               : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0)
        return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "replace") {
    Value count = a.get_or(2, "count", Value::integer(-1));
    std::string r = replace_all(s, str_arg(pos_arg(0, "old"), "replace() argument 1"),
                                str_arg(pos_arg(1, "new"), "replace() argument 2"), int_arg(count, "count"));
    in.check_size(r.size());
    return Value::string(std::move(r));
  }
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "lower" || name == "casefold") return Value::string(py_lower(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (char32_t c : utf8_decode(s)) utf8_append(out, lower_cp(c) != c ? lower_cp(c) : upper_cp(c));
    return Value::string(out);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const std::string& sub = str_arg(pos_arg(0, "sub"), "must be str");
    std::size_t hit = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (hit == std::string::npos) {
      if (name.find("index") != std::string::npos) fail("ValueError", "substring not found");
      return Value::integer(-1);
    }
    return Value::integer(std::int64_t(utf8_length(std::string_view(s).substr(0, hit))));
  }
  if (name == "count") {
    const std::string& sub = str_arg(pos_arg(0, "sub"), "must be str");
    if (sub.empty()) return Value::integer(std::int64_t(utf8_length(s) + 1));
    std::int64_t n = 0;
    for (std::size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "format") {
    std::string r = py_format(in, s, a);
    in.check_size(r.size());
    return Value::string(std::move(r));
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value iterated = in.iterate(pos_arg(0, "iterable")); const Value& item : iterated.items()) {
      if (!first) out += s;
      first = false;
      if (!item.is_string()) fail("TypeError", "sequence item: expected str instance, " + type_name(item) + " found");
      out += item.s;
      in.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "splitlines") {
    std::vector<Value> out;
    for (auto& line : splitlines(s, truthy(a.get_or(0, "keepends", Value::boolean(false)))))
      out.push_back(Value::string(std::move(line)));
    return Value::make_list(std::move(out));
  }
  auto all_of = [&](bool (*pred)(char32_t)) {
    std::u32string cps = utf8_decode(s);
    return Value::boolean(!cps.empty() && std::all_of(cps.begin(), cps.end(), pred));
  };
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return all_of(is_digit);
  if (name == "isalpha") return all_of(is_alpha);
  if (name == "isalnum") return all_of([](char32_t c) { return is_alpha(c) || is_digit(c); });
  if (name == "isspace") return all_of(is_ws);
  if (name == "isupper" || name == "islower" || name == "istitle") {
    CallArgs none;
    Interpreter* ip = &in;
    return Value::boolean(apply_test(*ip, name == "isupper" ? "upper" : "lower", Value::string(s), none));
  }
  if (name == "removeprefix") {
    const std::string& p = str_arg(pos_arg(0, "prefix"), "removeprefix() argument");
    return Value::string(s.compare(0, p.size(), p) == 0 && s.size() >= p.size() ? s.substr(p.size()) : s);
  }
  if (name == "removesuffix") {
    const std::string& p = str_arg(pos_arg(0, "suffix"), "removesuffix() argument");
    bool ends = !p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
    return Value::string(ends ? s.substr(0, s.size() - p.size()) : s);
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    std::int64_t width = std::min<std::int64_t>(int_arg(pos_arg(0, "width"), "width"), 1 << 20);
    std::string fill = name == "zfill" ? "0" : to_str(a.get_or(1, "fillchar", Value::string(" ")));
    std::int64_t n = std::int64_t(utf8_length(s));
    if (width <= n) return Value::string(s);
    std::int64_t pad = width - n;
    std::int64_t left = name == "ljust" ? 0 : name == "center" ? pad / 2 + (pad & width & 1) : pad;
    std::string out;
    for (std::int64_t k = 0; k < left; ++k) out += fill;
    out += s;
    for (std::int64_t k = left; k < pad; ++k) out += fill;
    return Value::string(out);
  }
  if (name == "partition" || name == "rpartition") {
    const std::string& sep = str_arg(pos_arg(0, "sep"), "must be str");
    std::size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      if (name == "partition")
        return Value::make_list({Value::string(s), Value::string(""), Value::string("")}, ListKind::Tuple);
      return Value::make_list({Value::string(""), Value::string(""), Value::string(s)}, ListKind::Tuple);
    }
    return Value::make_list({Value::string(s.substr(0, hit)), Value::string(sep), Value::string(s.substr(hit + sep.size()))},
                            ListKind::Tuple);
  }
  if (name == "expandtabs") return Value::string(replace_all(s, "\t", "        ", -1));
  fail("TypeError", "str." + name + " is not supported");
}

}  // namespace

Value call_method(Interpreter& in, const Value& obj, const std::string& name, const CallArgs& a) {
  in.count_steps();
  if (obj.is_string()) return str_method(in, obj.s, name, a);
  if (obj.is_dict()) {
    if (name == "get") {
      if (a.positional.empty()) fail("TypeError", "get expected at least 1 argument, got 0");
      if (const Value* v = obj.dict->find(a.positional[0])) return *v;
      return a.positional.size() > 1 ? a.positional[1] : Value::none();
    }
    std::vector<Value> out;
    ListKind kind = name == "items" ? ListKind::DictItems : name == "keys" ? ListKind::DictKeys : ListKind::DictValues;
    if (name == "copy") return Value::make_dict(obj.entries());
    for (const auto& [k, v] : obj.entries()) {
      if (name == "items") out.push_back(Value::make_list({k, v}, ListKind::Tuple));
      else out.push_back(name == "keys" ? k : v);
    }
    return Value::make_list(std::move(out), kind);
  }
  if (name == "copy") return Value::make_list(obj.items());
  if (a.positional.empty()) fail("TypeError", name + "() takes exactly one argument (0 given)");
  std::int64_t n = 0;
  for (std::size_t k = 0; k < obj.items().size(); ++k) {
    if (!equals(obj.items()[k], a.positional[0])) continue;
    if (name == "index") return Value::integer(std::int64_t(k));
    ++n;
  }
  if (name == "index") fail("ValueError", to_repr(a.positional[0]) + " is not in list");
  return Value::integer(n);
}

std::vector<std::pair<std::string, Value>> make_globals() {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Value::callable("range", [](Interpreter& in, CallArgs& a) {
    std::int64_t start = 0, stop = 0, step = 1;
    if (a.positional.size() == 1) {
      stop = int_arg(a.positional[0], "range");
    } else if (a.positional.size() >= 2) {
      start = int_arg(a.positional[0], "range");
      stop = int_arg(a.positional[1], "range");
      if (a.positional.size() > 2) step = int_arg(a.positional[2], "range");
    } else {
      fail("TypeError", "range expected at least 1 argument, got 0");
    }
    if (step == 0) fail("ValueError", "range() arg 3 must not be zero");
    double count = std::ceil((double(stop) - double(start)) / double(step));
    if (count > 100000)
      fail("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    std::vector<Value> items;
    for (std::int64_t k = start; step > 0 ? k < stop : k > stop; k += step) items.push_back(Value::integer(k));
    in.count_steps(items.size());
    return Value::make_list(std::move(items), ListKind::Range);
  }));
  g.emplace_back("dict", Value::callable("dict", [](Interpreter&, CallArgs& a) {
    std::vector<std::pair<Value, Value>> items;
    if (!a.positional.empty() && a.positional[0].is_dict()) items = a.positional[0].entries();
    for (auto& [k, v] : a.keyword) items.emplace_back(Value::string(k), v);
    return Value::make_dict(std::move(items));
  }));
  g.emplace_back("namespace", Value::callable("namespace", [](Interpreter& in, CallArgs& a) {
    Value v;
    v.type = Type::Namespace;
    v.ns = std::make_shared<NamespaceData>();
    in.track(v.ns);
    if (!a.positional.empty() && a.positional[0].is_dict())
      for (const auto& [k, val] : a.positional[0].entries()) v.ns->attrs.emplace_back(to_str(k), val);
    for (auto& [k, val] : a.keyword) {
      if (Value* slot = v.ns->find(k)) *slot = val;
      else v.ns->attrs.emplace_back(k, val);
    }
    return v;
  }));
  g.emplace_back("raise_exception", Value::callable("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    if (a.positional.empty()) fail("TypeError", "raise_exception() missing 1 required positional argument: 'msg'");
    fail("raise_exception", to_str(a.positional[0]));
  }));
  g.emplace_back("strftime_now", Value::callable("strftime_now", [](Interpreter& in, CallArgs& a) {
    std::string format = a.positional.empty() ? "" : to_str(a.positional[0]);
    std::time_t t = std::time_t(in.now_seconds());
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::string out(256 + format.size() * 8, '\0');
    std::size_t n = format.empty() ? 0 : std::strftime(out.data(), out.size(), format.c_str(), &tm);
    out.resize(n);
    return Value::string(out);
  }));
  return g;
}

}  // namespace infer::chat::jinja
