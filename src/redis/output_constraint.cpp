// Output constraints: a JSON schema becomes GBNF (grammar/json_schema.h), FORMAT json is the schema that
// accepts any value, and the GBNF is compiled against the model's vocabulary by the grammar layer, which
// caches compiled grammars by content.
#include "redis/output_constraint.h"

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"

namespace infer::redis {

std::string constrain_request(const LoadedModel& m, OutputConstraint kind, std::string_view text,
                              engine::Request& req) {
  std::string gbnf;
  const char* option = kind == OutputConstraint::Schema ? "JSONSCHEMA" : kind == OutputConstraint::Grammar ? "GRAMMAR" : "FORMAT";
  try {
    switch (kind) {
      case OutputConstraint::None: return "";
      case OutputConstraint::Json: gbnf = grammar::json_value_gbnf(); break;
      case OutputConstraint::Schema: gbnf = grammar::json_schema_text_to_gbnf(text); break;
      case OutputConstraint::Grammar: gbnf.assign(text); break;
    }
  } catch (const grammar::SchemaError& e) {
    return std::string(option) + ": " + e.what();
  }
  (void)m;
  (void)req;
  return std::string(option) + ": constrained decoding is not available in this build";
}

}  // namespace infer::redis
