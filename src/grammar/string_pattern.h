// A JSON Schema `pattern` (a regular expression, matched anywhere in the string unless anchored) turned into
// the GBNF of the JSON string contents that match it: the text between the quotes, with `"`, `\` and control
// characters written as JSON escapes. The supported subset is listed in grammar/json_schema.h.
// Thread-safety: pure function.
#pragma once
#include <string>
#include <string_view>

namespace infer::grammar {

// GBNF expression for the contents of a JSON string matching `pattern`; `any_char_rule` names the rule of
// one JSON string character (used where the pattern is not anchored). Throws std::invalid_argument naming
// the construct and its byte offset in the pattern.
std::string string_pattern_gbnf(std::string_view pattern, const std::string& any_char_rule);

}  // namespace infer::grammar
