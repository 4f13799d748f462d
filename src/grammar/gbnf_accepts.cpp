// grammar_accepts and the built-in JSON grammar.
#include "grammar/gbnf.h"
#include "grammar/recognizer.h"
#include "grammar/utf8_feed.h"

namespace infer::grammar {

bool grammar_accepts(const Grammar& g, std::string_view utf8_text) {
  // The recogniser shares the grammar; this one is the caller's, alive for the call.
  RecognizerStates states(std::shared_ptr<const Grammar>(&g, [](const Grammar*) {}));
  StateId s = states.initial();
  Utf8Partial partial;
  for (char c : utf8_text) {
    uint32_t cp;
    const int r = utf8_feed(partial, uint8_t(c), &cp);
    if (r < 0) return false;
    if (r == 1) s = states.advance(s, cp);
    if (s == RecognizerStates::kDead) return false;
  }
  return partial.remain == 0 && states.can_end(s);
}

const std::string& json_value_gbnf() {
  // No blank space before or after the value, so that generation ends with its last character;
  // blank space inside is at most a newline and 20 blanks between tokens.
  static const std::string text = R"(# Any JSON value (RFC 8259).
root   ::= value
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
ws     ::= | " " | "\n" [ \t]{0,20}
)";
  return text;
}

}  // namespace infer::grammar
