// Jinja2's lexer with Hugging Face's settings: trim_blocks and lstrip_blocks on, whitespace control
// (`-` and `+` beside a tag), comments dropped, raw blocks as text, one trailing newline dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace infer::chat::jinja {

enum class TokenKind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  TokenKind kind;
  std::string text;  // text, name, operator, or a string literal's value
  int line = 1;
  int column = 1;
};

// Throws TemplateError ("TemplateSyntaxError: line L column C: ...") on an unterminated tag or literal.
std::vector<Token> tokenize(std::string_view source);

}  // namespace infer::chat::jinja
