// JSON Schema → GBNF. A schema is first brought to a form without `$ref` siblings and `allOf` (merged
// keyword by keyword; `anyOf`/`oneOf` inside a merge are distributed over it), then each kind it allows is
// written as grammar: objects and arrays as their own rules, `$ref` targets as one rule per JSON pointer
// (so recursive schemas become recursive rules), primitives (`string`, `number`, `value` ...) as shared
// rules added on first use. Integer ranges are spelled out digit by digit, as the ranges of decimal strings
// of each length between the bounds.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/gbnf_writer.h"
#include "grammar/string_pattern.h"

namespace infer::grammar {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 128;                          // schema nesting and $ref-through-allOf merging
constexpr int64_t kMaxBound = 9'999'999'999'999'999;    // 16 digits: what `integer` generates at most
constexpr int kIntegerDigits = 16;
constexpr size_t kMaxProperties = 512;
constexpr size_t kMaxMerges = 20000;                    // merge steps for allOf / $ref with siblings
constexpr uint64_t kMaxCount = 10000;                   // minLength, maxLength, minItems, maxItems

const std::set<std::string, std::less<>> kAnnotations = {"title",   "description", "$schema",    "$id",
                                                         "default", "examples",    "$comment",   "deprecated",
                                                         "readOnly", "writeOnly"};
const std::set<std::string, std::less<>> kKeywords = {
    "type",     "properties", "required",  "additionalProperties", "enum",      "const",     "items",
    "prefixItems", "minItems", "maxItems", "anyOf",                "oneOf",     "allOf",     "$ref",
    "$defs",    "definitions", "minLength", "maxLength",           "pattern",   "format",    "minimum",
    "maximum",  "exclusiveMinimum", "exclusiveMaximum"};
const Json kTrue = true;
const Json kEmptyObject = Json::object();
const Json kEmptyArray = Json::array();
const std::vector<std::string> kAllTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};

std::string where(const std::string& ptr) { return " at #" + ptr; }

std::string pointer_token(const std::string& key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

[[noreturn]] void fail(const std::string& what, const std::string& ptr) { throw SchemaError(what + where(ptr)); }

bool is_meaningful(const std::string& key) {
  return !kAnnotations.contains(key) && key != "$defs" && key != "definitions";
}

// `s` without annotations and definitions.
Json constraints_of(const Json& s) {
  Json out = Json::object();
  for (const auto& [k, v] : s.items())
    if (is_meaningful(k)) out[k] = v;
  return out;
}

void check_keywords(const Json& s, const std::string& ptr) {
  if (s.is_boolean()) return;
  if (!s.is_object()) fail("a schema must be an object or a boolean", ptr);
  for (const auto& [k, v] : s.items())
    if (!kAnnotations.contains(k) && !kKeywords.contains(k))
      fail("unsupported keyword \"" + k + "\"", ptr);
}

std::optional<uint64_t> count_keyword(const Json& s, const char* key, const std::string& ptr) {
  if (!s.contains(key)) return std::nullopt;
  const Json& v = s.at(key);
  const bool integral = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0) ||
                        (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() == std::floor(v.get<double>()));
  if (!integral) fail(std::string(key) + " must be a non-negative integer", ptr + "/" + key);
  // A grammar repeats an element at most this often (each repetition is grammar state).
  if (v.get<double>() > static_cast<double>(kMaxCount))
    fail(std::string(key) + " above " + std::to_string(kMaxCount) + " is not supported", ptr + "/" + key);
  return v.get<uint64_t>();
}

std::vector<std::string> types_of(const Json& s, const std::string& ptr) {
  std::vector<std::string> out;
  auto add = [&](const Json& t) {
    if (!t.is_string() || std::find(kAllTypes.begin(), kAllTypes.end(), t.get<std::string>()) == kAllTypes.end())
      fail("unknown type " + t.dump(), ptr + "/type");
    if (std::find(out.begin(), out.end(), t.get<std::string>()) == out.end()) out.push_back(t.get<std::string>());
  };
  const Json& t = s.at("type");
  if (t.is_array()) {
    if (t.empty()) fail("type must not be an empty list", ptr + "/type");
    for (const auto& e : t) add(e);
  } else {
    add(t);
  }
  return out;
}

bool value_has_type(const Json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  return v.is_number_integer() || v.is_number_unsigned() ||
         (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()));
}

// ---- integer ranges as decimal strings ----

std::string digit_class(char lo, char hi) {
  if (lo == hi) return gbnf_literal(std::string(1, lo));
  return gbnf_class({{static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)}}, false);
}

// Decimal strings of length |lo| between lo and hi (same length, lo <= hi).
std::string same_length_range(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return "";
  if (lo == hi) return gbnf_literal(lo);
  if (lo[0] == hi[0]) return gbnf_seq({gbnf_literal(std::string(1, lo[0])), same_length_range(lo.substr(1), hi.substr(1))});
  const std::string low_rest = lo.substr(1), high_rest = hi.substr(1);
  const bool low_full = low_rest == std::string(n - 1, '0');
  const bool high_full = high_rest == std::string(n - 1, '9');
  const std::string any_rest = gbnf_repeat(digit_class('0', '9'), n - 1, n - 1);
  std::vector<std::string> alts;
  if (!low_full)
    alts.push_back(gbnf_seq({gbnf_literal(std::string(1, lo[0])), same_length_range(low_rest, std::string(n - 1, '9'))}));
  const char mid_lo = low_full ? lo[0] : static_cast<char>(lo[0] + 1);
  const char mid_hi = high_full ? hi[0] : static_cast<char>(hi[0] - 1);
  if (mid_lo <= mid_hi) alts.push_back(gbnf_seq({digit_class(mid_lo, mid_hi), any_rest}));
  if (!high_full)
    alts.push_back(gbnf_seq({gbnf_literal(std::string(1, hi[0])), same_length_range(std::string(n - 1, '0'), high_rest)}));
  return gbnf_alt(alts);
}

int64_t pow10(size_t n) {
  int64_t v = 1;
  while (n--) v *= 10;
  return v;
}

// Non-negative integers in [lo, hi] written without leading zeros.
std::string nonnegative_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  const size_t lo_len = std::to_string(lo).size(), hi_len = std::to_string(hi).size();
  for (size_t len = lo_len; len <= hi_len; ++len) {
    const int64_t a = len == lo_len ? lo : pow10(len - 1);
    const int64_t b = len == hi_len ? hi : pow10(len) - 1;
    alts.push_back(same_length_range(std::to_string(a), std::to_string(b)));
  }
  return gbnf_alt(alts);
}

std::string integer_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back(gbnf_seq({gbnf_literal("-"), nonnegative_range(hi < 0 ? -hi : 1, -lo)}));
  if (hi >= 0) alts.push_back(nonnegative_range(std::max<int64_t>(lo, 0), hi));
  return gbnf_alt(alts);
}

// Bounds of a numeric schema: the real bounds (exclusive or not) as given.
struct NumericBounds {
  std::optional<double> lo, hi;
  bool lo_exclusive = false, hi_exclusive = false;
};

NumericBounds bounds_of(const Json& s, const std::string& ptr) {
  NumericBounds b;
  auto read = [&](const char* key) -> std::optional<double> {
    if (!s.contains(key)) return std::nullopt;
    const Json& v = s.at(key);
    if (!v.is_number()) fail(std::string(key) + " must be a number", ptr + "/" + key);
    const double d = v.get<double>();
    if (!(std::fabs(d) <= static_cast<double>(kMaxBound)))
      fail(std::string(key) + " beyond ±" + std::to_string(kMaxBound) + " is not supported", ptr + "/" + key);
    return d;
  };
  const auto min = read("minimum"), xmin = read("exclusiveMinimum");
  const auto max = read("maximum"), xmax = read("exclusiveMaximum");
  b.lo = min;
  if (xmin && (!b.lo || *xmin >= *b.lo)) {
    b.lo = xmin;
    b.lo_exclusive = true;
  }
  b.hi = max;
  if (xmax && (!b.hi || *xmax <= *b.hi)) {
    b.hi = xmax;
    b.hi_exclusive = true;
  }
  return b;
}

// The smallest / largest integer inside the bounds, clamped to what `integer` generates.
int64_t integer_lo(const NumericBounds& b) {
  if (!b.lo) return -kMaxBound;
  const double c = b.lo_exclusive ? std::floor(*b.lo) + 1 : std::ceil(*b.lo);
  return std::max(static_cast<int64_t>(c), -kMaxBound);
}
int64_t integer_hi(const NumericBounds& b) {
  if (!b.hi) return kMaxBound;
  const double f = b.hi_exclusive ? std::ceil(*b.hi) - 1 : std::floor(*b.hi);
  return std::min(static_cast<int64_t>(f), kMaxBound);
}

// Decodes UTF-8 (valid: it came through the JSON parser) into code points.
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    const int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : 4;
    uint32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int k = 1; k < len && i + k < s.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(c);
    i += len;
  }
  return out;
}

class Converter {
 public:
  explicit Converter(const Json& root) : root_(root) {}

  std::string run() {
    const std::string root = rules_.reserve("root");
    claim_ = root;
    std::string body = visit(root_, "", "root");
    if (claim_ != kClaimed) rules_.define(root, body);
    return rules_.text();
  }

 private:
  struct DepthGuard {
    DepthGuard(int& d, const std::string& ptr) : depth(d) {
      if (++depth > kMaxDepth) fail("schema nested deeper than " + std::to_string(kMaxDepth), ptr);
    }
    ~DepthGuard() { --depth; }
    int& depth;
  };

  // ---- shared rules ----

  std::string prim(const std::string& name) {
    if (rules_.has(name)) return name;
    rules_.reserve(name);
    rules_.define(name, prim_body(name));
    return name;
  }

  std::string prim_body(const std::string& name) {
    const std::string digit = digit_class('0', '9');
    const std::string quote = gbnf_literal("\"");
    if (name == "sp") return gbnf_repeat(gbnf_literal(" "), 0, 1);
    if (name == "hex") return gbnf_class({{'0', '9'}, {'A', 'F'}, {'a', 'f'}}, false);
    if (name == "unicode-escape") {
      const std::string h = prim("hex");
      return gbnf_alt({gbnf_seq({gbnf_class({{'0', '9'}, {'A', 'C'}, {'a', 'c'}}, false), gbnf_repeat(h, 3, 3)}),
                       gbnf_seq({gbnf_class({{'D', 'D'}, {'d', 'd'}}, false), digit_class('0', '7'), gbnf_repeat(h, 2, 2)}),
                       gbnf_seq({gbnf_class({{'E', 'F'}, {'e', 'f'}}, false), gbnf_repeat(h, 3, 3)})});
    }
    if (name == "key-char") return gbnf_class({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true);
    if (name == "char") {
      return gbnf_alt({prim("key-char"),
                       gbnf_seq({gbnf_literal("\\"),
                                 gbnf_alt({gbnf_class({{'"', '"'}, {'/', '/'}, {'\\', '\\'}, {'b', 'b'}, {'f', 'f'},
                                                       {'n', 'n'}, {'r', 'r'}, {'t', 't'}},
                                                      false),
                                           gbnf_seq({gbnf_literal("u"), prim("unicode-escape")})})})});
    }
    if (name == "string") return gbnf_seq({quote, gbnf_repeat(prim("char"), 0, std::nullopt), quote});
    if (name == "integer") {
      return gbnf_seq({gbnf_repeat(gbnf_literal("-"), 0, 1),
                       gbnf_alt({gbnf_literal("0"), gbnf_seq({digit_class('1', '9'), gbnf_repeat(digit, 0, kIntegerDigits - 1)})})});
    }
    if (name == "number") {
      return gbnf_seq({prim("integer"), gbnf_repeat(gbnf_seq({gbnf_literal("."), gbnf_repeat(digit, 1, 16)}), 0, 1),
                       gbnf_repeat(gbnf_seq({gbnf_class({{'E', 'E'}, {'e', 'e'}}, false),
                                             gbnf_repeat(gbnf_class({{'+', '+'}, {'-', '-'}}, false), 0, 1),
                                             gbnf_repeat(digit, 1, 3)}),
                                   0, 1)});
    }
    if (name == "boolean") return gbnf_alt({gbnf_literal("true"), gbnf_literal("false")});
    if (name == "null") return gbnf_literal("null");
    if (name == "value") {
      return gbnf_alt({prim("object"), prim("array"), prim("string"), prim("number"), prim("boolean"), prim("null")});
    }
    if (name == "object") {
      const std::string member = gbnf_seq({prim("string"), gbnf_literal(":"), prim("sp"), prim("value")});
      return gbnf_seq({gbnf_literal("{"),
                       gbnf_repeat(gbnf_seq({member, gbnf_repeat(gbnf_seq({gbnf_literal(","), prim("sp"), member}), 0, std::nullopt)}), 0, 1),
                       gbnf_literal("}")});
    }
    if (name == "array") {
      return gbnf_seq({gbnf_literal("["),
                       gbnf_repeat(gbnf_seq({prim("value"), gbnf_repeat(gbnf_seq({gbnf_literal(","), prim("sp"), prim("value")}), 0, std::nullopt)}), 0, 1),
                       gbnf_literal("]")});
    }
    if (name == "date") {
      const std::string dash = gbnf_literal("-");
      const std::string day28 = gbnf_alt({gbnf_seq({gbnf_literal("0"), digit_class('1', '9')}),
                                          gbnf_seq({gbnf_literal("1"), digit}), gbnf_seq({gbnf_literal("2"), digit_class('0', '8')})});
      const std::string day30 = gbnf_alt({gbnf_seq({gbnf_literal("0"), digit_class('1', '9')}),
                                          gbnf_seq({digit_class('1', '2'), digit}), gbnf_literal("30")});
      const std::string day31 = gbnf_alt({gbnf_seq({gbnf_literal("0"), digit_class('1', '9')}),
                                          gbnf_seq({digit_class('1', '2'), digit}), gbnf_seq({gbnf_literal("3"), digit_class('0', '1')})});
      const std::string long_month = gbnf_alt({gbnf_seq({gbnf_literal("0"), gbnf_class({{'1', '1'}, {'3', '3'}, {'5', '5'}, {'7', '8'}}, false)}),
                                               gbnf_seq({gbnf_literal("1"), gbnf_class({{'0', '0'}, {'2', '2'}}, false)})});
      const std::string short_month = gbnf_alt({gbnf_seq({gbnf_literal("0"), gbnf_class({{'4', '4'}, {'6', '6'}, {'9', '9'}}, false)}),
                                                gbnf_literal("11")});
      // 29 February is left out: it needs a leap year.
      return gbnf_seq({digit_class('1', '9'), gbnf_repeat(digit, 3, 3), dash,
                       gbnf_alt({gbnf_seq({long_month, dash, day31}), gbnf_seq({short_month, dash, day30}),
                                 gbnf_seq({gbnf_literal("02"), dash, day28})})});
    }
    if (name == "time") {
      const std::string hour = gbnf_alt({gbnf_seq({digit_class('0', '1'), digit}), gbnf_seq({gbnf_literal("2"), digit_class('0', '3')})});
      const std::string minute = gbnf_seq({digit_class('0', '5'), digit});
      const std::string colon = gbnf_literal(":");
      return gbnf_seq({hour, colon, minute, colon, minute,
                       gbnf_repeat(gbnf_seq({gbnf_literal("."), gbnf_repeat(digit, 1, 6)}), 0, 1),
                       gbnf_alt({gbnf_literal("Z"), gbnf_seq({gbnf_class({{'+', '+'}, {'-', '-'}}, false), hour, colon, minute})})});
    }
    if (name == "date-time") return gbnf_seq({prim("date"), gbnf_literal("T"), prim("time")});
    if (name == "uuid") {
      const std::string h = gbnf_class({{'0', '9'}, {'a', 'f'}}, false);
      const std::string dash = gbnf_literal("-");
      return gbnf_seq({gbnf_repeat(h, 8, 8), dash, gbnf_repeat(h, 4, 4), dash, gbnf_repeat(h, 4, 4), dash,
                       gbnf_repeat(h, 4, 4), dash, gbnf_repeat(h, 12, 12)});
    }
    throw std::logic_error("no primitive rule " + name);
  }

  // ---- references and merging ----

  const Json& resolve(const Json& ref, const std::string& ptr) {
    if (!ref.is_string()) fail("$ref must be a string", ptr + "/$ref");
    const std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#') fail("only local $ref (\"#...\") is supported, not \"" + r + "\"", ptr + "/$ref");
    try {
      return root_.at(Json::json_pointer(ref_target(ref)));
    } catch (const nlohmann::json::exception&) {
      fail("$ref \"" + r + "\" points at nothing", ptr + "/$ref");
    }
  }

  // The JSON pointer of a local reference, its %XX escapes decoded.
  static std::string ref_target(const Json& ref) {
    const std::string r = ref.get<std::string>();
    std::string target;
    for (size_t i = 1; i < r.size(); ++i) {
      const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
      if (r[i] == '%' && i + 2 < r.size() && hex(r[i + 1]) && hex(r[i + 2])) {
        target += static_cast<char>(std::stoi(r.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        target += r[i];
      }
    }
    return target;
  }

  // `s` with its top-level $ref and allOf merged away (it may still hold anyOf/oneOf).
  Json flatten(const Json& s, const std::string& ptr, int depth) {
    if (depth > kMaxDepth) fail("$ref and allOf nest too deeply to merge (a recursive $ref inside allOf?)", ptr);
    if (s.is_boolean()) return s;
    check_keywords(s, ptr);  // refuses anything but an object
    Json rest = constraints_of(s);
    if (rest.contains("$ref")) {
      const Json ref = rest["$ref"];
      rest.erase("$ref");
      return merge(flatten(resolve(ref, ptr), ptr, depth + 1), rest, ptr, depth + 1);
    }
    if (rest.contains("allOf")) {
      const Json parts = rest["allOf"];
      rest.erase("allOf");
      if (!parts.is_array() || parts.empty()) fail("allOf must be a non-empty array", ptr + "/allOf");
      Json out = rest;
      for (size_t i = 0; i < parts.size(); ++i)
        out = merge(out, parts[i], ptr + "/allOf/" + std::to_string(i), depth + 1);
      return out;
    }
    return rest;
  }

  // A schema accepting what both accept; `false` when one of them is `false`.
  Json merge(const Json& a_in, const Json& b_in, const std::string& ptr, int depth) {
    // $refs are copied into merges: allOf over references to allOfs could grow exponentially.
    if (++merges_ > kMaxMerges) fail("allOf/$ref merging grows past " + std::to_string(kMaxMerges) + " steps", ptr);
    if (a_in.is_boolean() && !a_in.get<bool>()) return false;
    if (b_in.is_boolean() && !b_in.get<bool>()) return false;
    if (a_in.is_boolean()) return flatten(b_in, ptr, depth + 1);
    if (b_in.is_boolean()) return flatten(a_in, ptr, depth + 1);
    const Json a = flatten(a_in, ptr, depth + 1);
    const Json b = flatten(b_in, ptr, depth + 1);
    if (a.is_boolean() || b.is_boolean()) return merge(a, b, ptr, depth + 1);
    for (const Json* side : {&a, &b}) {
      for (const char* key : {"anyOf", "oneOf"}) {
        if (!side->contains(key)) continue;
        if (side->contains("anyOf") && side->contains("oneOf")) fail("anyOf together with oneOf is not supported", ptr);
        const Json& other = side == &a ? b : a;
        Json rest = *side;
        rest.erase(key);
        const Json& branches = side->at(key);
        if (!branches.is_array() || branches.empty()) fail(std::string(key) + " must be a non-empty array", ptr + "/" + key);
        Json out = Json::array();
        for (const auto& branch : branches) {
          Json m = merge(merge(rest, branch, ptr, depth + 1), other, ptr, depth + 1);
          if (!(m.is_boolean() && !m.get<bool>())) out.push_back(m);
        }
        if (out.empty()) return false;
        return Json{{"anyOf", out}};
      }
    }
    Json out = Json::object();
    std::set<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const auto& k : keys) {
      if (k == "properties" || k == "additionalProperties" || k == "items" || k == "prefixItems" || k == "enum" ||
          k == "const")
        continue;  // merged below, together with their partners
      const bool in_a = a.contains(k), in_b = b.contains(k);
      if (!(in_a && in_b)) {
        out[k] = in_a ? a.at(k) : b.at(k);
        continue;
      }
      const Json &va = a.at(k), &vb = b.at(k);
      if (k == "type") {
        Json both = Json::array();
        for (const auto& ta : types_of(a, ptr))
          for (const auto& tb : types_of(b, ptr)) {
            if (ta == tb || (ta == "integer" && tb == "number")) both.push_back(ta);
            else if (ta == "number" && tb == "integer") both.push_back(tb);
          }
        if (both.empty()) fail("allOf: types " + va.dump() + " and " + vb.dump() + " have nothing in common", ptr);
        out[k] = both;
      } else if (k == "required") {
        for (const Json* r : {&va, &vb})
          if (!r->is_array()) fail("required must be an array of strings", ptr + "/required");
        Json req = va;
        for (const auto& n : vb)
          if (std::find(req.begin(), req.end(), n) == req.end()) req.push_back(n);
        out[k] = req;
      } else if (k == "minLength" || k == "minItems" || k == "minimum" || k == "exclusiveMinimum") {
        out[k] = va.is_number() && vb.is_number() && vb.get<double>() > va.get<double>() ? vb : va;
      } else if (k == "maxLength" || k == "maxItems" || k == "maximum" || k == "exclusiveMaximum") {
        out[k] = va.is_number() && vb.is_number() && vb.get<double>() < va.get<double>() ? vb : va;
      } else if (va == vb) {
        out[k] = va;
      } else {
        fail("allOf: two different values of \"" + k + "\" cannot be merged", ptr);
      }
    }
    merge_values(a, b, out, ptr);
    merge_objects(a, b, out, ptr, depth);
    merge_arrays(a, b, out, ptr, depth);
    return out;
  }

  // enum and const of both sides become one enum (their intersection).
  static void merge_values(const Json& a, const Json& b, Json& out, const std::string& ptr) {
    std::optional<Json> allowed;
    for (const Json* side : {&a, &b}) {
      std::optional<Json> mine;
      if (side->contains("enum")) {
        if (!side->at("enum").is_array()) fail("enum must be an array", ptr + "/enum");
        mine = side->at("enum");
      }
      if (side->contains("const")) {
        Json c = Json::array({side->at("const")});
        if (mine) {
          Json both = Json::array();
          for (const auto& v : *mine)
            if (v == c[0]) both.push_back(v);
          c = both;
        }
        mine = c;
      }
      if (!mine) continue;
      if (!allowed) {
        allowed = mine;
        continue;
      }
      Json both = Json::array();
      for (const auto& v : *allowed)
        if (std::find(mine->begin(), mine->end(), v) != mine->end()) both.push_back(v);
      allowed = both;
    }
    if (!allowed) return;
    if (allowed->empty()) fail("allOf: enum/const values have nothing in common", ptr);
    out["enum"] = *allowed;
  }

  void merge_objects(const Json& a, const Json& b, Json& out, const std::string& ptr, int depth) {
    const bool any = a.contains("properties") || b.contains("properties") || a.contains("additionalProperties") ||
                     b.contains("additionalProperties");
    if (!any) return;
    const Json empty = Json::object();
    const Json& pa = a.contains("properties") ? a.at("properties") : empty;
    const Json& pb = b.contains("properties") ? b.at("properties") : empty;
    if (!pa.is_object() || !pb.is_object()) fail("properties must be an object", ptr + "/properties");
    const Json xa = a.contains("additionalProperties") ? a.at("additionalProperties") : Json(true);
    const Json xb = b.contains("additionalProperties") ? b.at("additionalProperties") : Json(true);
    Json props = Json::object();
    for (const auto& [k, v] : pa.items())
      props[k] = merge(v, pb.contains(k) ? pb.at(k) : xb, ptr + "/properties/" + pointer_token(k), depth + 1);
    for (const auto& [k, v] : pb.items())
      if (!pa.contains(k)) props[k] = merge(v, xa, ptr + "/properties/" + pointer_token(k), depth + 1);
    if (!props.empty()) out["properties"] = props;
    const Json extra = merge(xa, xb, ptr + "/additionalProperties", depth + 1);
    if (!(extra.is_boolean() && extra.get<bool>())) out["additionalProperties"] = extra;
  }

  void merge_arrays(const Json& a, const Json& b, Json& out, const std::string& ptr, int depth) {
    const bool any = a.contains("items") || b.contains("items") || a.contains("prefixItems") || b.contains("prefixItems");
    if (!any) return;
    for (const Json* side : {&a, &b}) {
      if (side->contains("prefixItems") && !side->at("prefixItems").is_array())
        fail("prefixItems must be an array", ptr + "/prefixItems");
      if (side->contains("items") && side->at("items").is_array())
        fail("items as an array (a tuple, before draft 2020-12) is not supported: use prefixItems", ptr + "/items");
    }
    auto element = [](const Json& s, size_t i) -> Json {
      if (s.contains("prefixItems") && i < s.at("prefixItems").size()) return s.at("prefixItems")[i];
      return s.contains("items") ? s.at("items") : Json(true);
    };
    const size_t na = a.contains("prefixItems") ? a.at("prefixItems").size() : 0;
    const size_t nb = b.contains("prefixItems") ? b.at("prefixItems").size() : 0;
    Json prefix = Json::array();
    for (size_t i = 0; i < std::max(na, nb); ++i)
      prefix.push_back(merge(element(a, i), element(b, i), ptr + "/prefixItems/" + std::to_string(i), depth + 1));
    if (!prefix.empty()) out["prefixItems"] = prefix;
    const Json items = merge(a.contains("items") ? a.at("items") : Json(true), b.contains("items") ? b.at("items") : Json(true),
                             ptr + "/items", depth + 1);
    if (!(items.is_boolean() && items.get<bool>())) out["items"] = items;
  }

  // ---- schemas to grammar ----

  std::string visit(const Json& s, const std::string& ptr, const std::string& hint) {
    DepthGuard guard(depth_, ptr);
    // Only the schema itself may take the claimed rule, none of its parts.
    const std::string claim = std::exchange(claim_, "");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("schema false accepts nothing", ptr);
      return prim("value");
    }
    check_keywords(s, ptr);
    // Annotations dropped; a copy only when there are any (schemas can be large and deep).
    Json stripped;
    const bool annotated = std::any_of(s.items().begin(), s.items().end(), [](const auto& kv) { return !is_meaningful(kv.key()); });
    if (annotated) stripped = constraints_of(s);
    const Json& c = annotated ? stripped : s;
    if (c.contains("$ref") && c.size() == 1) return ref_rule(c.at("$ref"), ptr);
    if (c.contains("$ref") || c.contains("allOf")) {
      const Json merged = flatten(c, ptr, 0);
      return visit(merged, ptr, hint);
    }
    if (c.contains("anyOf") || c.contains("oneOf")) return union_of(c, ptr, hint);
    if (c.contains("enum") || c.contains("const")) return values_of(c, ptr);
    if (c.empty()) return prim("value");
    std::vector<std::string> types = c.contains("type") ? types_of(c, ptr) : implied_types(c);
    if (std::find(types.begin(), types.end(), "number") != types.end())
      types.erase(std::remove(types.begin(), types.end(), "integer"), types.end());
    std::vector<std::string> alts;
    if (types.size() == 1 && (types[0] == "object" || types[0] == "array") && !claim.empty()) {
      const std::string name = types[0] == "object" ? object_of(c, ptr, hint, claim) : array_of(c, ptr, hint, claim);
      claim_ = kClaimed;
      return name;
    }
    for (const auto& t : types) alts.push_back(typed(t, c, ptr, types.size() == 1 ? hint : hint + "-" + t));
    return gbnf_alt(alts);
  }

  static std::vector<std::string> implied_types(const Json& c) {
    std::vector<std::string> out;
    auto has = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return c.contains(k); });
    };
    if (has({"properties", "required", "additionalProperties"})) out.push_back("object");
    if (has({"items", "prefixItems", "minItems", "maxItems"})) out.push_back("array");
    if (has({"minLength", "maxLength", "pattern", "format"})) out.push_back("string");
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) out.push_back("number");
    return out.empty() ? kAllTypes : out;
  }

  std::string ref_rule(const Json& ref, const std::string& ptr) {
    const Json& target = resolve(ref, ptr);
    const std::string pointer = ref_target(ref);
    if (auto it = ref_rules_.find(pointer); it != ref_rules_.end()) return it->second;
    const std::string last = pointer.substr(pointer.rfind('/') == std::string::npos ? 0 : pointer.rfind('/') + 1);
    const std::string name = rules_.reserve(last.empty() ? "ref" : last);
    ref_rules_[pointer] = name;
    claim_ = name;
    std::string body = visit(target, pointer, name);
    if (claim_ == kClaimed) {
      claim_.clear();
      return name;
    }
    claim_.clear();
    if (body == name) fail("$ref " + ref.dump() + " refers only to itself", ptr + "/$ref");
    rules_.define(name, body);
    return name;
  }

  std::string union_of(const Json& c, const std::string& ptr, const std::string& hint) {
    if (c.contains("anyOf") && c.contains("oneOf")) fail("anyOf together with oneOf is not supported", ptr);
    const std::string key = c.contains("anyOf") ? "anyOf" : "oneOf";
    const Json& branches = c.at(key);
    if (!branches.is_array() || branches.empty()) fail(key + " must be a non-empty array", ptr + "/" + key);
    Json rest = c;
    rest.erase(key);
    std::vector<std::string> alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string bptr = ptr + "/" + key + "/" + std::to_string(i);
      const Json branch = rest.empty() ? branches[i] : merge(rest, branches[i], bptr, 0);
      if (branch.is_boolean() && !branch.get<bool>()) continue;
      alts.push_back(visit(branch, bptr, hint + "-" + std::to_string(i)));
    }
    if (alts.empty()) fail(key + ": no branch accepts anything", ptr);
    return gbnf_alt(alts);
  }

  std::string values_of(const Json& c, const std::string& ptr) {
    for (const auto& [k, v] : c.items())
      if (k != "enum" && k != "const" && k != "type")
        fail("keyword \"" + k + "\" beside enum/const is not supported", ptr);
    Json values = Json::array();
    if (c.contains("enum")) {
      if (!c.at("enum").is_array() || c.at("enum").empty()) fail("enum must be a non-empty array", ptr + "/enum");
      values = c.at("enum");
    }
    if (c.contains("const")) {
      const Json& k = c.at("const");
      if (c.contains("enum") && std::find(values.begin(), values.end(), k) == values.end())
        fail("const is not one of the enum values", ptr + "/const");
      values = Json::array({k});
    }
    const std::vector<std::string> types = c.contains("type") ? types_of(c, ptr) : kAllTypes;
    std::vector<std::string> alts;
    for (const auto& v : values) {
      const bool typed_ok = std::any_of(types.begin(), types.end(), [&](const auto& t) { return value_has_type(v, t); });
      if (typed_ok) alts.push_back(gbnf_literal(v.dump()));
    }
    if (alts.empty()) fail("no enum/const value has the schema's type", ptr);
    return gbnf_alt(alts);
  }

  std::string typed(const std::string& type, const Json& c, const std::string& ptr, const std::string& hint) {
    if (type == "string") return string_of(c, ptr, hint);
    if (type == "integer") return integer_of(c, ptr);
    if (type == "number") return number_of(c, ptr);
    if (type == "boolean") return prim("boolean");
    if (type == "null") return prim("null");
    if (type == "array") return array_of(c, ptr, hint);
    return object_of(c, ptr, hint);
  }

  std::string string_of(const Json& c, const std::string& ptr, const std::string& hint) {
    const std::string quote = gbnf_literal("\"");
    const auto min = count_keyword(c, "minLength", ptr);
    const auto max = count_keyword(c, "maxLength", ptr);
    if (c.contains("format")) {
      if (c.contains("pattern") || min || max) fail("format together with pattern, minLength or maxLength is not supported", ptr);
      const Json& f = c.at("format");
      const std::string name = f.is_string() ? f.get<std::string>() : f.dump();
      if (name != "date" && name != "time" && name != "date-time" && name != "uuid")
        fail("unsupported format \"" + name + "\" (supported: date, time, date-time, uuid)", ptr + "/format");
      return gbnf_seq({quote, prim(name), quote});
    }
    if (c.contains("pattern")) {
      if (min || max) fail("pattern together with minLength or maxLength is not supported", ptr);
      if (!c.at("pattern").is_string()) fail("pattern must be a string", ptr + "/pattern");
      try {
        const std::string body = string_pattern_gbnf(c.at("pattern").get<std::string>(), prim("char"));
        return rules_.add(hint + "-pattern", gbnf_seq({quote, body, quote}));
      } catch (const std::invalid_argument& e) {
        fail(std::string("pattern: ") + e.what(), ptr + "/pattern");
      }
    }
    if (!min && !max) return prim("string");
    if (min && max && *max < *min) fail("maxLength below minLength", ptr);
    return gbnf_seq({quote, gbnf_repeat(prim("char"), min.value_or(0), max), quote});
  }

  std::string integer_of(const Json& c, const std::string& ptr) {
    const NumericBounds b = bounds_of(c, ptr);
    if (!b.lo && !b.hi) return prim("integer");
    const int64_t lo = integer_lo(b), hi = integer_hi(b);
    if (lo > hi) fail("no integer lies between the bounds", ptr);
    return integer_range(lo, hi);
  }

  std::string number_of(const Json& c, const std::string& ptr) {
    const NumericBounds b = bounds_of(c, ptr);
    if (!b.lo && !b.hi) return prim("number");
    std::vector<std::string> alts;
    const int64_t lo = integer_lo(b), hi = integer_hi(b);
    if (lo <= hi) alts.push_back(integer_range(lo, hi));
    // k.f with f > 0 lies in (k, k+1): inside the bounds when lo <= k and k + 1 <= hi.
    const int64_t frac_lo = std::max<int64_t>(b.lo ? static_cast<int64_t>(std::ceil(*b.lo)) : 0, 0);
    const int64_t frac_hi = b.hi ? static_cast<int64_t>(std::floor(*b.hi)) - 1 : kMaxBound;
    if (frac_lo <= frac_hi) {
      const std::string fraction = gbnf_seq({gbnf_literal("."), gbnf_repeat(digit_class('0', '9'), 0, 15), digit_class('1', '9')});
      alts.push_back(gbnf_seq({gbnf_alt({nonnegative_range(frac_lo, frac_hi)}), fraction}));
    }
    if (alts.empty()) fail("no number lies between the bounds", ptr);
    return gbnf_alt(alts);
  }

  // `rule`: the rule to define (reserved by the caller), or "" for a new one.
  std::string array_of(const Json& c, const std::string& ptr, const std::string& hint, const std::string& rule = "") {
    if (c.contains("items") && c.at("items").is_array())
      fail("items as an array (a tuple, before draft 2020-12) is not supported: use prefixItems", ptr + "/items");
    if (c.contains("prefixItems") && !c.at("prefixItems").is_array()) fail("prefixItems must be an array", ptr + "/prefixItems");
    const uint64_t min = count_keyword(c, "minItems", ptr).value_or(0);
    std::optional<uint64_t> max = count_keyword(c, "maxItems", ptr);
    const Json& prefix = c.contains("prefixItems") ? c.at("prefixItems") : kEmptyArray;
    const Json& items = c.contains("items") ? c.at("items") : kTrue;
    size_t k = prefix.size();
    for (size_t i = 0; i < prefix.size(); ++i)
      if (prefix[i].is_boolean() && !prefix[i].get<bool>()) {
        k = i;
        max = std::min<uint64_t>(max.value_or(i), i);
        break;
      }
    if (items.is_boolean() && !items.get<bool>()) max = std::min<uint64_t>(max.value_or(k), k);
    if (max && *max < min) fail("no array length satisfies minItems, maxItems and the items allowed", ptr);
    if (max && *max < k) k = static_cast<size_t>(*max);
    const std::string name = rule.empty() ? rules_.reserve(hint) : rule;
    const std::string comma = gbnf_seq({gbnf_literal(","), prim("sp")});
    // Positions from k on: items, as many as the bounds leave.
    std::string tail;
    const uint64_t rest_min = min > k ? min - k : 0;
    const std::optional<uint64_t> rest_max = max ? std::optional<uint64_t>(*max - k) : std::nullopt;
    if (!rest_max || *rest_max > 0) {
      const std::string item = visit(items, ptr + "/items", hint + "-item");
      if (k > 0) {
        tail = gbnf_repeat(gbnf_seq({comma, item}), rest_min, rest_max);
      } else {
        const std::string more = gbnf_repeat(gbnf_seq({comma, item}), rest_min > 0 ? rest_min - 1 : 0,
                                             rest_max ? std::optional<uint64_t>(*rest_max - 1) : std::nullopt);
        tail = gbnf_seq({item, more});
        if (rest_min == 0) tail = gbnf_alt({tail, ""});
      }
    }
    for (size_t i = k; i-- > 0;) {
      const std::string element = visit(prefix[i], ptr + "/prefixItems/" + std::to_string(i), hint + "-" + std::to_string(i));
      const std::string body = gbnf_seq({i == 0 ? "" : comma, element, tail});
      tail = i < min ? body : gbnf_alt({body, ""});
    }
    rules_.define(name, gbnf_seq({gbnf_literal("["), tail, gbnf_literal("]")}));
    return name;
  }

  struct Member {
    std::string name;
    const Json* schema;
    std::string ptr;
    bool required;
  };

  std::string object_of(const Json& c, const std::string& ptr, const std::string& hint, const std::string& rule = "") {
    const Json& props = c.contains("properties") ? c.at("properties") : kEmptyObject;
    if (!props.is_object()) fail("properties must be an object", ptr + "/properties");
    const Json& required = c.contains("required") ? c.at("required") : kEmptyArray;
    if (!required.is_array() || !std::all_of(required.begin(), required.end(), [](const Json& r) { return r.is_string(); }))
      fail("required must be an array of strings", ptr + "/required");
    const Json& extra = c.contains("additionalProperties") ? c.at("additionalProperties") : kTrue;
    const bool extra_allowed = !(extra.is_boolean() && !extra.get<bool>());
    auto is_required = [&](const std::string& n) { return std::find(required.begin(), required.end(), n) != required.end(); };

    // Optional members are a chain of rules that may match nothing; the recogniser bounds such chains.
    if (props.size() > kMaxProperties)
      fail("more than " + std::to_string(kMaxProperties) + " properties in one object are not supported", ptr + "/properties");
    std::vector<Member> members;
    std::vector<std::string> names;
    for (const auto& [k, v] : props.items()) {
      names.push_back(k);
      members.push_back({k, &v, ptr + "/properties/" + pointer_token(k), is_required(k)});
    }
    for (const auto& r : required) {
      const std::string n = r.get<std::string>();
      if (props.contains(n) || std::find(names.begin(), names.end(), n) != names.end()) continue;
      if (!extra_allowed) fail("required property \"" + n + "\" is not in properties and additionalProperties is false", ptr);
      names.push_back(n);
      members.push_back({n, &extra, ptr + "/additionalProperties", true});
    }
    const std::string name = rule.empty() ? rules_.reserve(hint) : rule;
    const std::string comma = gbnf_seq({gbnf_literal(","), prim("sp")});
    std::vector<std::string> kv;    // member text, "" for a member that may not appear
    std::vector<bool> needed;
    for (const auto& m : members) {
      const bool forbidden = m.schema->is_boolean() && !m.schema->get<bool>();
      if (forbidden && m.required) fail("required property \"" + m.name + "\" is forbidden by its schema", m.ptr);
      std::string text;
      if (!forbidden) {  // visit() may throw: never inside a braced list (GCC 12 unwinds those wrongly)
        const std::string value = visit(*m.schema, m.ptr, hint + "-" + m.name);
        text = gbnf_seq({gbnf_literal(Json(m.name).dump() + ":"), prim("sp"), value});
      }
      if (text.size() > 80) text = rules_.add(hint + "-" + m.name + "-member", text);  // written once, named often
      kv.push_back(text);
      needed.push_back(m.required);
    }
    std::string extra_kv;
    if (extra_allowed) {
      const std::string value = visit(extra, ptr + "/additionalProperties", hint + "-value");
      extra_kv = gbnf_seq({other_key(names, hint), gbnf_literal(":"), prim("sp"), value});
    }
    // The members that may come first: any optional one up to and including the first required one.
    std::vector<size_t> first_candidates;
    for (size_t i = 0; i < kv.size(); ++i) {
      if (kv[i].empty()) continue;
      first_candidates.push_back(i);
      if (needed[i]) break;
    }
    const bool reached_required = !first_candidates.empty() && needed[first_candidates.back()];
    // after(i): members i.. when one was written before them (so each starts with a comma). Written out
    // for each first candidate when they are few; as a chain of rules when many, which keeps the
    // grammar linear in the number of members.
    const std::string extras_tail = extra_kv.empty() ? "" : gbnf_repeat(gbnf_seq({comma, extra_kv}), 0, std::nullopt);
    auto member_after = [&](size_t i) {
      const std::string piece = kv[i].empty() ? "" : gbnf_seq({comma, kv[i]});
      return needed[i] ? piece : gbnf_repeat(piece, 0, 1);
    };
    std::vector<std::string> after(kv.size() + 1);
    after[kv.size()] = extras_tail;
    if (first_candidates.size() <= 4) {
      for (const size_t c : first_candidates) {
        std::vector<std::string> parts;
        for (size_t j = c + 1; j < kv.size(); ++j) parts.push_back(member_after(j));
        parts.push_back(extras_tail);
        after[c + 1] = gbnf_seq(parts);
      }
    } else {
      for (size_t i = kv.size(); i-- > 1;) {
        const std::string body = gbnf_seq({member_after(i), after[i + 1]});
        after[i] = body.empty() || gbnf_is_term(body) ? body : rules_.add(hint + "-rest", body);
      }
    }
    std::vector<std::string> firsts;
    for (const size_t c : first_candidates) firsts.push_back(gbnf_seq({kv[c], after[c + 1]}));
    if (!reached_required) {
      if (!extra_kv.empty()) firsts.push_back(gbnf_seq({extra_kv, extras_tail}));
      firsts.push_back("");
    }
    rules_.define(name, gbnf_seq({gbnf_literal("{"), gbnf_alt(firsts), gbnf_literal("}")}));
    return name;
  }

  // A JSON string (no escapes) other than each of `names`: a rule per node of the names' trie.
  std::string other_key(const std::vector<std::string>& names, const std::string& hint) {
    const std::string quote = gbnf_literal("\"");
    const std::string key_char = prim("key-char");
    struct Node {
      std::map<uint32_t, size_t> children;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const auto& n : names) {
      const auto cps = code_points(n);
      if (std::any_of(cps.begin(), cps.end(), [](uint32_t c) { return c < 0x20 || c == '"' || c == '\\'; })) continue;
      size_t at = 0;
      for (const uint32_t c : cps) {
        auto it = trie[at].children.find(c);
        if (it == trie[at].children.end()) {
          trie.push_back({});
          it = trie[at].children.emplace(c, trie.size() - 1).first;
        }
        at = it->second;
      }
      trie[at].terminal = true;
    }
    if (trie[0].children.empty() && !trie[0].terminal)
      return gbnf_seq({quote, gbnf_repeat(key_char, 0, std::nullopt), quote});
    std::vector<std::string> node_rule(trie.size());
    for (size_t i = 0; i < trie.size(); ++i) node_rule[i] = rules_.reserve(hint + "-key");
    for (size_t i = 0; i < trie.size(); ++i) {
      std::vector<CodePointRange> excluded = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
      std::vector<std::string> alts;
      if (!trie[i].terminal) alts.push_back("");
      for (const auto& [c, child] : trie[i].children) {
        excluded.push_back({c, c});
        alts.push_back(gbnf_seq({gbnf_class({{c, c}}, false), node_rule[child]}));
      }
      std::sort(excluded.begin(), excluded.end(), [](const auto& x, const auto& y) { return x.lo < y.lo; });
      alts.push_back(gbnf_seq({gbnf_class(excluded, true), gbnf_repeat(key_char, 0, std::nullopt)}));
      rules_.define(node_rule[i], gbnf_alt(alts));
    }
    return gbnf_seq({quote, node_rule[0], quote});
  }

  const Json& root_;
  GbnfRules rules_;
  std::map<std::string, std::string> ref_rules_;  // JSON pointer → its rule
  int depth_ = 0;
  size_t merges_ = 0;
  // A rule reserved for the schema about to be visited (the root, a $ref target): an object or array
  // schema defines it directly instead of a rule of its own, and sets claim_ to kClaimed.
  std::string claim_;
  static constexpr const char* kClaimed = "\x01claimed";
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  std::string gbnf = Converter(schema).run();
  // A $ref that reaches itself before any text (`{"anyOf": [{"$ref": "#"}, ...]}`) is a schema that
  // cannot be generated from: the recogniser refuses left recursion, and names the rule.
  try {
    parse_gbnf(gbnf);
  } catch (const GrammarError& e) {
    const std::string what = e.what();
    const auto rule = what.find("rule '");
    if (what.find("left-recursive") == std::string::npos || rule == std::string::npos) throw;
    throw SchemaError("a $ref reaches itself before any text is written (" +
                      what.substr(rule, what.find('\'', rule + 6) + 1 - rule) + " of the grammar)");
  }
  return gbnf;
}

std::string json_schema_text_to_gbnf(std::string_view schema_text) {
  Json schema;
  try {
    schema = Json::parse(schema_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw SchemaError("schema is not JSON: parse error at byte " + std::to_string(e.byte));
  }
  return json_schema_to_gbnf(schema);
}

}  // namespace infer::grammar
