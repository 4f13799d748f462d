// Splits a template into text and the tokens of its tags, as Jinja2's lexer does (see jinja_lexer.h).
#include "chat/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "chat/jinja_value.h"

namespace infer::chat::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Jinja reads "\r\n" and "\r" as "\n" and drops one trailing newline (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      out += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      out += source[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {
    line_starts_.push_back(0);
    for (std::size_t k = 0; k < src_.size(); ++k)
      if (src_[k] == '\n') line_starts_.push_back(k + 1);
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      std::size_t open = find_tag(pos_);
      if (open == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        break;
      }
      char kind = src_[open + 1];
      std::size_t after = open + 2;
      char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      std::size_t raw_body = kind == '%' ? match_raw_begin(open) : std::string::npos;
      std::string text = src_.substr(pos_, open - pos_);
      strip_before(text, sign, kind != '{', line_starting);
      emit_text(text, pos_);
      if (raw_body != std::string::npos) {
        line_starting = false;
        pos_ = raw_body;
        lex_raw(line_starting);
      } else if (kind == '#') {
        lex_comment(open, sign ? after + 1 : after, line_starting);
      } else {
        tokens_.push_back({kind == '{' ? TokenKind::VarBegin : TokenKind::BlockBegin, "", 0, 0});
        place(tokens_.back(), open);
        lex_tag(sign ? after + 1 : after, kind == '{', line_starting);
      }
    }
    tokens_.push_back({TokenKind::End, "", 0, 0});
    place(tokens_.back(), src_.size());
    return std::move(tokens_);
  }

 private:
  std::string src_;
  std::size_t pos_ = 0;
  std::vector<Token> tokens_;
  std::vector<std::size_t> line_starts_;

  [[noreturn]] void error(std::size_t at, const std::string& what) {
    Token t{};
    place(t, at);
    fail("TemplateSyntaxError", "line " + std::to_string(t.line) + " column " + std::to_string(t.column) + ": " + what);
  }

  void place(Token& t, std::size_t at) {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    std::size_t line_start = *(it - 1);
    t.line = int(it - line_starts_.begin());
    t.column = int(at - line_start + 1);
  }

  std::size_t find_tag(std::size_t from) const {
    for (std::size_t k = src_.find('{', from); k != std::string::npos; k = src_.find('{', k + 1)) {
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    }
    return std::string::npos;
  }

  // `{% raw %}` (with optional -/+): the position after it, or npos.
  std::size_t match_raw_begin(std::size_t open) const {
    std::size_t k = open + 2;
    if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) ++k;
    while (k < src_.size() && is_space(src_[k])) ++k;
    if (src_.compare(k, 3, "raw") != 0) return std::string::npos;
    k += 3;
    while (k < src_.size() && is_space(src_[k])) ++k;
    if (src_.compare(k, 3, "-%}") == 0) {
      k += 3;
      while (k < src_.size() && is_space(src_[k])) ++k;
      return k;
    }
    if (src_.compare(k, 2, "%}") == 0) return k + 2;
    return std::string::npos;
  }

  void strip_before(std::string& text, char sign, bool lstrip_applies, bool line_starting) {
    if (sign == '-') {
      std::size_t end = text.size();
      while (end > 0 && is_space(text[end - 1])) --end;
      text.resize(end);
    } else if (sign != '+' && lstrip_applies) {
      std::size_t nl = text.rfind('\n');
      std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool all_space = l_pos < text.size();
        for (std::size_t k = l_pos; k < text.size(); ++k) all_space = all_space && is_space(text[k]);
        if (all_space) text.resize(l_pos);
      }
    }
  }

  void emit_text(const std::string& text, std::size_t at) {
    if (text.empty()) return;
    tokens_.push_back({TokenKind::Text, text, 0, 0});
    place(tokens_.back(), at);
  }

  // After `%}` / `#}`: `-` strips all following whitespace, `+` nothing, else trim_blocks drops one newline.
  std::size_t after_block_end(std::size_t end_of_marker, char sign, bool& line_starting) {
    std::size_t k = end_of_marker;
    if (sign == '-') {
      while (k < src_.size() && is_space(src_[k])) ++k;
    } else if (sign != '+' && k < src_.size() && src_[k] == '\n') {
      ++k;
    }
    line_starting = k > 0 && src_[k - 1] == '\n';
    return k;
  }

  void lex_comment(std::size_t open, std::size_t body, bool& line_starting) {
    std::size_t close = src_.find("#}", body);
    if (close == std::string::npos) error(open, "Missing end of comment tag");
    char sign = close > body && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    pos_ = after_block_end(close + 2, sign, line_starting);
  }

  void lex_raw(bool& line_starting) {
    for (std::size_t k = find_tag(pos_); k != std::string::npos; k = find_tag(k + 1)) {
      if (src_[k + 1] != '%') continue;
      std::size_t m = k + 2;
      char sign = m < src_.size() && (src_[m] == '-' || src_[m] == '+') ? src_[m] : 0;
      if (sign) ++m;
      while (m < src_.size() && is_space(src_[m])) ++m;
      if (src_.compare(m, 6, "endraw") != 0) continue;
      m += 6;
      while (m < src_.size() && is_space(src_[m])) ++m;
      char end_sign = 0;
      if (m < src_.size() && (src_[m] == '-' || src_[m] == '+')) end_sign = src_[m++];
      if (src_.compare(m, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, k - pos_);
      strip_before(text, sign, true, line_starting);
      emit_text(text, pos_);
      pos_ = after_block_end(m + 2, end_sign, line_starting);
      return;
    }
    error(pos_, "Missing end of raw directive");
  }

  void lex_tag(std::size_t k, bool variable, bool& line_starting) {
    std::vector<char> balance;
    while (true) {
      while (k < src_.size() && is_space(src_[k])) ++k;
      if (k >= src_.size()) error(k, variable ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      if (balance.empty()) {
        if (variable) {
          if (src_.compare(k, 3, "-}}") == 0 || src_.compare(k, 2, "}}") == 0) {
            Token end{TokenKind::VarEnd, "", 0, 0};
            place(end, k);
            bool strip = src_[k] == '-';
            k += strip ? 3 : 2;
            if (strip) while (k < src_.size() && is_space(src_[k])) ++k;
            tokens_.push_back(end);
            line_starting = src_[k - 1] == '\n';
            pos_ = k;
            return;
          }
        } else {
          char sign = src_[k] == '-' || src_[k] == '+' ? src_[k] : 0;
          if (src_.compare(sign ? k + 1 : k, 2, "%}") == 0) {
            tokens_.push_back({TokenKind::BlockEnd, "", 0, 0});
            place(tokens_.back(), k);
            pos_ = after_block_end(k + (sign ? 3 : 2), sign, line_starting);
            return;
          }
        }
      }
      Token t{TokenKind::Op, "", 0, 0};
      place(t, k);
      char c = src_[k];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t e = k;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        t.kind = TokenKind::Name;
        t.text = src_.substr(k, e - k);
        k = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        k = lex_number(k, t);
      } else if (c == '\'' || c == '"') {
        k = lex_string(k, t);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        t.text = std::string(1, c);
        for (const char* op : two)
          if (src_.compare(k, 2, op) == 0) t.text = op;
        if (t.text.size() == 1 && std::string_view("+-*/%~<>=.,:|()[]{}").find(c) == std::string_view::npos)
          error(k, std::string("unexpected char '") + c + "'");
        if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        if (c == ')' || c == ']' || c == '}') {
          if (balance.empty()) error(k, std::string("unexpected '") + c + "'");
          if (balance.back() != c) error(k, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
          balance.pop_back();
        }
        k += t.text.size();
      }
      tokens_.push_back(std::move(t));
    }
  }

  std::size_t lex_number(std::size_t k, Token& t) {
    auto digits = [&](std::size_t e) {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      return e;
    };
    std::size_t e = digits(k);
    t.kind = TokenKind::Int;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      t.kind = TokenKind::Float;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      std::size_t m = e + 1;
      if (m < src_.size() && (src_[m] == '+' || src_[m] == '-')) ++m;
      if (m < src_.size() && std::isdigit(static_cast<unsigned char>(src_[m]))) {
        e = digits(m);
        t.kind = TokenKind::Float;
      }
    }
    for (std::size_t m = k; m < e; ++m)
      if (src_[m] != '_') t.text += src_[m];
    return e;
  }

  // A Python string literal, unescaped as Jinja does ("unicode-escape").
  std::size_t lex_string(std::size_t k, Token& t) {
    char quote = src_[k];
    t.kind = TokenKind::String;
    std::size_t m = k + 1;
    while (true) {
      if (m >= src_.size()) error(k, "unexpected char '" + std::string(1, quote) + "'");
      char c = src_[m];
      if (c == quote) return m + 1;
      if (c != '\\') {
        t.text += c;
        ++m;
        continue;
      }
      if (m + 1 >= src_.size()) error(k, "unterminated string");
      char e = src_[m + 1];
      m += 2;
      auto hex = [&](int n) {
        char32_t v = 0;
        for (int d = 0; d < n; ++d, ++m) {
          if (m >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[m]))) error(m, "truncated escape");
          v = v * 16 + char32_t(std::isdigit(static_cast<unsigned char>(src_[m])) ? src_[m] - '0' : (std::tolower(src_[m]) - 'a' + 10));
        }
        utf8_append(t.text, v);
      };
      switch (e) {
        case 'n': t.text += '\n'; break;
        case 't': t.text += '\t'; break;
        case 'r': t.text += '\r'; break;
        case 'b': t.text += '\b'; break;
        case 'f': t.text += '\f'; break;
        case 'v': t.text += '\v'; break;
        case 'a': t.text += '\a'; break;
        case '0': t.text += '\0'; break;
        case '\\': t.text += '\\'; break;
        case '\'': t.text += '\''; break;
        case '"': t.text += '"'; break;
        case '\n': break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default: t.text += '\\'; t.text += e; break;
      }
    }
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace infer::chat::jinja
