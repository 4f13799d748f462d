// Output constraints: a JSON schema becomes GBNF (grammar/json_schema.h), FORMAT json is the schema that
// accepts any value, and the GBNF is compiled against the model's vocabulary by the grammar layer, which
// caches compiled grammars by content.
#include "redis/output_constraint.h"

#include "grammar/compiled_grammar.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"

namespace infer::redis {

std::string constrain_request(const LoadedModel& m, OutputConstraint kind, std::string_view text,
                              engine::Request& req) {
  if (kind == OutputConstraint::None) return "";
  const char* option = kind == OutputConstraint::Schema ? "JSONSCHEMA" : kind == OutputConstraint::Grammar ? "GRAMMAR" : "FORMAT";
  try {
    std::string converted;
    std::string_view gbnf = text;
    if (kind == OutputConstraint::Json) {
      gbnf = grammar::json_value_gbnf();
    } else if (kind == OutputConstraint::Schema) {
      converted = grammar::json_schema_text_to_gbnf(text);
      gbnf = converted;
    }
    req.grammar = grammar::compile_grammar(gbnf, m.engine->tokenizer());
  } catch (const grammar::SchemaError& e) {
    return std::string(option) + ": " + e.what();
  } catch (const grammar::GrammarError& e) {
    // For JSONSCHEMA the converter wrote the grammar: a position in it would mean nothing to the caller.
    if (kind == OutputConstraint::Schema) return std::string(option) + ": cannot compile the schema's grammar: " + e.what();
    return std::string(option) + ": " + e.what();
  }
  return "";
}

}  // namespace infer::redis
