// Test helpers for constrained output: the schema corpus (tests/grammar/schemas/*.json: a schema, texts it
// accepts and texts it refuses, whether its instances are bounded in size) and an independent validator,
// Debian's python3-jsonschema run through /usr/bin/python3 (tests/support/validate_json_schema.py).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace infer::test {

struct SchemaCase {
  std::string name;             // file name without .json
  nlohmann::ordered_json schema;
  std::vector<std::string> valid;    // exact texts, compact as the converter writes them
  std::vector<std::string> invalid;
  bool bounded = false;         // every instance is short: fit for generation tests
};

// Every case of the corpus, by name.
std::vector<SchemaCase> schema_corpus();

// For each text: "" when python3-jsonschema accepts it under `schema` (draft 2020-12, formats checked),
// else its reason. Throws std::runtime_error when the validator cannot run.
std::vector<std::string> python_schema_verdicts(const nlohmann::ordered_json& schema,
                                                const std::vector<std::string>& texts);

}  // namespace infer::test
