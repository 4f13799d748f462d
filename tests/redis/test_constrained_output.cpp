// FORMAT json, JSONSCHEMA and GRAMMAR on INFER.GENERATE and INFER.RAG through a real redis-server: every
// option error, and (with the grammar engine) output that validates, streamed or not.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "support/story_documents.h"

namespace infer::test {
namespace {

class ConstrainedOutput : public SharedServerTest<ConstrainedOutput> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  void SetUp() override {
    SharedServerTest<ConstrainedOutput>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    run({"FLUSHALL"});
    for (size_t i = 0; i < 2; ++i) {
      const std::string key = "doc:" + std::to_string(i);
      ASSERT_EQ(run({"INFER.TOKENIZE", "stories", kStoryDocuments[i], "STORE", key}).find("(error)"), std::string::npos);
      ASSERT_EQ(run({"INFER.EMBED", "stories", kStoryDocuments[i], "STORE", "kb", "e" + std::to_string(i), "SETATTR",
                     "{\"tokens\": \"" + key + "\"}"}),
                "1");
    }
  }
};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::vector<std::string>> kBases = {
    {"INFER.GENERATE", "stories", "PROMPT", "Once"},
    {"INFER.RAG", "stories", "kb", "QUERY", "Who?", "MAXTOKENS", "8"},
};

TEST_F(ConstrainedOutput, RefusesBadOptionsBeforeGenerating) {
  const std::string big(256 * 1024 + 1, ' ');
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"FORMAT"}, "FORMAT needs a value"},
      {{"JSONSCHEMA"}, "JSONSCHEMA needs a value"},
      {{"GRAMMAR"}, "GRAMMAR needs a value"},
      {{"FORMAT", "xml"}, "FORMAT must be json"},
      {{"FORMAT", "json", "FORMAT", "json"}, "FORMAT given twice"},
      {{"JSONSCHEMA", "{}", "JSONSCHEMA", "{}"}, "JSONSCHEMA given twice"},
      {{"GRAMMAR", "root ::= \"a\"", "GRAMMAR", "root ::= \"b\""}, "GRAMMAR given twice"},
      {{"FORMAT", "json", "JSONSCHEMA", "{}"}, "FORMAT, JSONSCHEMA and GRAMMAR exclude each other: give one"},
      {{"GRAMMAR", "root ::= \"a\"", "FORMAT", "json"}, "FORMAT, JSONSCHEMA and GRAMMAR exclude each other: give one"},
      {{"JSONSCHEMA", ""}, "JSONSCHEMA must not be empty"},
      {{"GRAMMAR", ""}, "GRAMMAR must not be empty"},
      {{"JSONSCHEMA", big}, "JSONSCHEMA of 262145 bytes is longer than 262144"},
      {{"GRAMMAR", big}, "GRAMMAR of 262145 bytes is longer than 262144"},
  };
  for (const auto& base : kBases)
    for (const auto& [args, message] : cases)
      EXPECT_EQ(run(cat(base, args)), "(error) ERR " + message) << base[0] << " " << args[0];
}

TEST_F(ConstrainedOutput, RefusesBadSchemasNamingTheKeywordOrPosition) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"J({"type": })J", "JSONSCHEMA: schema is not JSON: parse error at byte 10"},
      {R"J({"type":"object","properties":{"a":{"type":"string","format":"email"}}})J",
       "JSONSCHEMA: unsupported format \"email\" (supported: date, time, date-time, uuid) at #/properties/a/format"},
      {R"J({"type":"object","patternProperties":{}})J", "JSONSCHEMA: unsupported keyword \"patternProperties\" at #"},
      {R"J({"type":"string","pattern":"(?=a)"})J", "JSONSCHEMA: pattern: unsupported lookahead (?= at offset 1 at #/pattern"},
      {R"J({"$ref":"#/$defs/nope"})J", "JSONSCHEMA: $ref \"#/$defs/nope\" points at nothing at #/$ref"},
  };
  for (const auto& base : kBases)
    for (const auto& [schema, message] : cases)
      EXPECT_EQ(run(cat(base, {"JSONSCHEMA", schema})), "(error) ERR " + message) << base[0] << " " << schema;
}

TEST_F(ConstrainedOutput, ConstraintKeywordsEndTokenKeyLists) {
  // TOKENS keys run up to the next keyword: FORMAT is one, so it is not taken as a key.
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.GENERATE", "stories", "TOKENS", "doc:0", "FORMAT", "json"}), "[doc:0]");
}

}  // namespace
}  // namespace infer::test
