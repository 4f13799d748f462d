// FORMAT json, JSONSCHEMA and GRAMMAR on INFER.GENERATE and INFER.RAG through a real redis-server: every
// option error, and (with the grammar engine) output that validates, streamed or not.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "support/json_schema_check.h"
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

TEST_F(ConstrainedOutput, RefusesBadGrammarsNamingLineAndColumn) {
  for (const auto& base : kBases) {
    const std::string open = run(cat(base, {"GRAMMAR", "root ::= (\"a\""}));
    EXPECT_EQ(open.rfind("(error) ERR GRAMMAR: line 1, column ", 0), 0u) << open;
    const std::string undefined = run(cat(base, {"GRAMMAR", "root ::= \"a\" item\n"}));
    EXPECT_EQ(undefined.rfind("(error) ERR GRAMMAR: line 1, column ", 0), 0u) << undefined;
    EXPECT_NE(undefined.find("item"), std::string::npos) << undefined;
  }
}

// A schema whose every instance is short, so that stories260K at temperature 1 finishes it.
const char* kPersonSchema = R"J({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":10},
  "age":{"type":"integer","minimum":0,"maximum":120},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3},
  "born":{"type":"string","format":"date"}},"required":["name","age"],"additionalProperties":false})J";

// The value of `name` in a RESP2 map reply (a flat array), or "" when absent.
std::string field(const redisReply* r, const std::string& name) {
  if (!r || r->type != REDIS_REPLY_ARRAY) return "";
  for (size_t i = 0; i + 1 < r->elements; i += 2)
    if (r->element[i]->type == REDIS_REPLY_STRING && name == r->element[i]->str) {
      const redisReply* v = r->element[i + 1];
      return v->type == REDIS_REPLY_STRING ? std::string(v->str, v->len) : show(v);
    }
  return "";
}

// The text entries of a stream, concatenated, and its finish entry.
std::pair<std::string, std::string> read_stream(redisContext* c, const std::string& key) {
  Reply entries = command(c, {"XRANGE", key, "-", "+"});
  std::string text, finish;
  if (!entries || entries->type != REDIS_REPLY_ARRAY) return {"", "(no stream)"};
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* kv = entries->element[i]->element[1];
    if (std::string(kv->element[0]->str) == "text") text += std::string(kv->element[1]->str, kv->element[1]->len);
    else finish = show(kv);
  }
  return {text, finish};
}

TEST_F(ConstrainedOutput, GenerateWithJsonSchemaGivesValidJsonThatEndsByItself) {
  const auto schema = nlohmann::ordered_json::parse(kPersonSchema);
  std::vector<std::string> texts;
  for (int seed = 1; seed <= 8; ++seed) {
    Reply r = command(c_.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once upon a time", "JSONSCHEMA", kPersonSchema,
                                 "TEMP", "1", "SEED", std::to_string(seed), "MAXTOKENS", "400", "WITHSTATS"});
    ASSERT_EQ(field(r.get(), "finish"), "stop") << show(r.get());
    texts.push_back(field(r.get(), "text"));
  }
  const auto verdicts = python_schema_verdicts(schema, texts);
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(verdicts[i], "") << texts[i];
}

TEST_F(ConstrainedOutput, GrammarAndFormatJsonOnGenerateWithStream) {
  const std::string arithmetic = "root ::= term ([-+*] term){0,3}\nterm ::= [0-9]{1,2} | \"(\" root \")\"\n";
  Reply r = command(c_.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "GRAMMAR", arithmetic, "TEMP", "1", "SEED",
                               "5", "MAXTOKENS", "300", "WITHSTATS", "STREAM", "g:out"});
  ASSERT_EQ(field(r.get(), "finish"), "stop") << show(r.get());
  const std::string text = field(r.get(), "text");
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.find_first_not_of("0123456789+-*()"), std::string::npos) << text;
  const auto [streamed, finish] = read_stream(c_.get(), "g:out");
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(finish.rfind("[finish, stop, tokens, ", 0), 0u) << finish;
  // FORMAT json: one JSON value.
  for (int seed = 1; seed <= 4; ++seed) {
    Reply j = command(c_.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "FORMAT", "JSON", "TEMP", "1", "SEED",
                                 std::to_string(seed), "MAXTOKENS", "500", "WITHSTATS"});
    ASSERT_EQ(field(j.get(), "finish"), "stop") << show(j.get());
    EXPECT_TRUE(nlohmann::json::accept(field(j.get(), "text"))) << field(j.get(), "text");
  }
}

TEST_F(ConstrainedOutput, RagWithJsonSchemaAndStream) {
  const auto schema = nlohmann::ordered_json::parse(kPersonSchema);
  std::vector<std::string> texts;
  for (int seed = 1; seed <= 4; ++seed) {
    const std::string key = "rag:out:" + std::to_string(seed);
    Reply r = command(c_.get(), {"INFER.RAG", "stories", "kb", "QUERY", kStoryDocuments[0], "COUNT", "2", "JSONSCHEMA",
                                 kPersonSchema, "TEMP", "1", "SEED", std::to_string(seed), "MAXTOKENS", "400",
                                 "WITHSTATS", "STREAM", key});
    ASSERT_EQ(field(r.get(), "finish"), "stop") << show(r.get());
    texts.push_back(field(r.get(), "text"));
    const auto [streamed, finish] = read_stream(c_.get(), key);
    EXPECT_EQ(streamed, texts.back());
    EXPECT_EQ(finish.rfind("[finish, stop, tokens, ", 0), 0u) << finish;
  }
  const auto verdicts = python_schema_verdicts(schema, texts);
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(verdicts[i], "") << texts[i];
  // The same seed gives the same text, streamed or not.
  EXPECT_EQ(run({"INFER.RAG", "stories", "kb", "QUERY", kStoryDocuments[0], "COUNT", "2", "JSONSCHEMA", kPersonSchema,
                 "TEMP", "1", "SEED", "1", "MAXTOKENS", "400"}),
            texts[0]);
}

}  // namespace
}  // namespace infer::test
