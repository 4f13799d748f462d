// Writing GBNF text: escaping and the few shapes of expression the converters build.
#include "grammar/gbnf_writer.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace infer::grammar {
namespace {

bool is_ascii_alnum(uint32_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string class_char(uint32_t c) {
  if (is_ascii_alnum(c)) return std::string(1, static_cast<char>(c));
  char buf[16];
  if (c < 0x80)
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
  else if (c <= 0xFFFF)
    std::snprintf(buf, sizeof buf, "\\u%04X", c);
  else
    std::snprintf(buf, sizeof buf, "\\U%08X", c);
  return buf;
}

// Index just past the term that starts at `i`, or npos when none starts there.
size_t skip_term(std::string_view e, size_t i) {
  if (i >= e.size()) return std::string_view::npos;
  const char c = e[i];
  if (c == '"' || c == '[') {
    const char close = c == '"' ? '"' : ']';
    for (size_t j = i + 1; j < e.size(); ++j) {
      if (e[j] == '\\') {
        ++j;
      } else if (e[j] == close) {
        return j + 1;
      }
    }
    return std::string_view::npos;
  }
  if (c == '(') {
    size_t j = i + 1;
    int depth = 1;
    while (j < e.size()) {
      if (e[j] == '"' || e[j] == '[') {
        j = skip_term(e, j);
        if (j == std::string_view::npos) return j;
        continue;
      }
      if (e[j] == '(') ++depth;
      if (e[j] == ')' && --depth == 0) return j + 1;
      ++j;
    }
    return std::string_view::npos;
  }
  size_t j = i;
  while (j < e.size() && (is_ascii_alnum(static_cast<unsigned char>(e[j])) || e[j] == '-' || e[j] == '_')) ++j;
  return j == i ? std::string_view::npos : j;
}

std::string as_term(const std::string& expr) { return gbnf_is_term(expr) ? expr : "(" + expr + ")"; }

}  // namespace

std::string gbnf_literal(std::string_view utf8) {
  std::string out = "\"";
  for (const char ch : utf8) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string gbnf_class(const std::vector<CodePointRange>& ranges, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const auto& r : ranges) {
    out += class_char(r.lo);
    if (r.hi > r.lo) out += "-" + class_char(r.hi);
  }
  return out + "]";
}

bool gbnf_is_term(std::string_view expr) { return !expr.empty() && skip_term(expr, 0) == expr.size(); }

std::string gbnf_seq(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

std::string gbnf_alt(const std::vector<std::string>& alternatives) {
  std::vector<std::string> nonempty;
  bool has_empty = false;
  for (const auto& a : alternatives) {
    if (a.empty()) {
      has_empty = true;
    } else if (std::find(nonempty.begin(), nonempty.end(), a) == nonempty.end()) {
      nonempty.push_back(a);
    }
  }
  if (nonempty.empty()) return "";
  std::string body;
  for (const auto& a : nonempty) body += (body.empty() ? "" : " | ") + a;
  if (nonempty.size() == 1 && !has_empty) return body;
  if (has_empty) return as_term(body) + "?";
  return "(" + body + ")";
}

std::string gbnf_repeat(const std::string& expr, uint64_t min, std::optional<uint64_t> max) {
  if (expr.empty() || (max && *max == 0)) return "";
  if (max && *max < min) throw std::logic_error("gbnf_repeat: max below min");
  if (min == 1 && max == 1) return expr;
  const std::string term = as_term(expr);
  if (min == 0 && max == 1) return term + "?";
  if (min == 0 && !max) return term + "*";
  if (min == 1 && !max) return term + "+";
  if (!max) return term + "{" + std::to_string(min) + ",}";
  if (min == *max) return term + "{" + std::to_string(min) + "}";
  return term + "{" + std::to_string(min) + "," + std::to_string(*max) + "}";
}

std::string GbnfRules::reserve(std::string_view hint) {
  std::string base;
  for (const char ch : hint) {
    const auto c = static_cast<unsigned char>(ch);
    if (base.size() >= 40) break;
    if (is_ascii_alnum(c)) {
      base += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    } else if (!base.empty() && base.back() != '-') {
      base += '-';
    }
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "r";
  std::string name = base;
  unsigned& n = next_suffix_.try_emplace(base, 2).first->second;
  while (has(name)) name = base + "-" + std::to_string(n++);
  index_.emplace(name, rules_.size());
  rules_.emplace_back(name, "");
  return name;
}

void GbnfRules::define(const std::string& name, std::string body) {
  const auto it = index_.find(name);
  if (it == index_.end()) throw std::logic_error("GbnfRules::define: rule " + name + " was not reserved");
  rules_[it->second].second = std::move(body);
}

std::string GbnfRules::add(std::string_view hint, std::string body) {
  std::string name = reserve(hint);
  define(name, std::move(body));
  return name;
}

bool GbnfRules::has(const std::string& name) const { return index_.contains(name); }

std::string GbnfRules::text() const {
  std::string out;
  for (const auto& [n, b] : rules_)
    if (n == "root") out += n + " ::= " + b + "\n";
  for (const auto& [n, b] : rules_)
    if (n != "root") out += n + " ::= " + b + "\n";
  return out;
}

}  // namespace infer::grammar
