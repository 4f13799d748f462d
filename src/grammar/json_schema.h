// JSON Schema → GBNF: a grammar whose language is a subset of the JSON texts the schema accepts, so that
// output constrained by it validates by construction.
//
// Supported keywords: `type` (a kind or a list of kinds), `properties`, `required`, `additionalProperties`
// (false or a schema; absent or true = any value under any other key), `enum`, `const`, `items`,
// `prefixItems`, `minItems`, `maxItems`, `anyOf`, `oneOf`, `allOf` (merged into one schema), local `$ref`
// (any JSON pointer into the document, usually into `$defs` / `definitions`; recursive references become
// recursive rules; one that reaches itself before any text is refused), string `minLength`, `maxLength`, `pattern`, `format` (date, time, date-time, uuid),
// `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numeric forms). Annotations (`title`,
// `description`, `$schema`, `$id`, `default`, `examples`, `$comment`, `deprecated`, `readOnly`,
// `writeOnly`) are ignored; any other keyword throws SchemaError naming it.
//
// The text generated is compact JSON: no whitespace except at most one space after `:` and `,`. Object
// members come in the order `properties` lists them (each optional one may be left out), then required names
// that `properties` does not list, then (unless `additionalProperties` is false) further members whose names
// differ from every listed one. Generation takes a subset of what the schema accepts where the exact
// language is not worth its grammar: numbers have at most 16 integer and 16 fraction digits and a 3-digit
// exponent; strings are written with unescaped characters and the escapes \" \\ \/ \b \f \n \r \t \uXXXX
// (no surrogates); a bounded `number` takes integers in range and non-negative decimals inside it; `oneOf`
// is generated as `anyOf` (valid when its branches are disjoint, as discriminated unions are).
//
// Patterns (ECMA/Python syntax, matched anywhere unless anchored): literals and escapes, `.`, classes with
// ranges and negation, \d \w \s \D \W \S, groups (capturing, `(?:`, named), alternation, the quantifiers
// * + ? {m} {m,} {m,n} (lazy forms too), and ^ $ at the ends of the pattern or of a top-level alternative.
// Backreferences, lookaround, word boundaries, flags and possessive quantifiers are refused by name.
// Counts (`minLength`, `maxLength`, `minItems`, `maxItems`, {m,n} in patterns) are at most 10000, groups
// nest at most 64 deep, schemas at most 128, and an object has at most 512 properties.
//
// Thread-safety: pure functions.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace infer::grammar {

// A schema that cannot be converted: the message names the keyword or the bad value and where it is, as a
// JSON pointer fragment ("unsupported keyword \"patternProperties\" at #/properties/a").
class SchemaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The GBNF grammar (start rule `root`) for `schema`. Throws SchemaError.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// The same for a schema given as JSON text; text that is not JSON throws SchemaError naming the byte offset.
std::string json_schema_text_to_gbnf(std::string_view schema_text);

}  // namespace infer::grammar
