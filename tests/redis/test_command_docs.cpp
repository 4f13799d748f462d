// COMMAND DOCS of every INFER.* command against a real redis-server: summary, complexity and the
// argument tree (src/redis/command_docs.cpp), and the tree agrees with the grammar in docs/redis.md and
// docs/vector.md: every keyword documented is a token of the tree, and every token is in the docs.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The first table cell of each "| `INFER.X ...` |" row, by command name in lower case (a row may hold
// two forms separated by " / ").
std::map<std::string, std::string> documented_usages() {
  std::map<std::string, std::string> out;
  for (const char* doc : {"/docs/redis.md", "/docs/vector.md"}) {
    std::ifstream f(source_dir() + doc);
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("| `INFER.", 0) != 0) continue;
      const size_t end = line.find(" |", 2);
      std::string cell = line.substr(2, end - 2);
      std::string name = cell.substr(1, cell.find_first_of(" `", 1) - 1);
      // Several commands in one cell ("`INFER.VEMB key element [RAW]`, `INFER.VCARD key`, ...").
      std::regex form("`(INFER\\.[A-Z]+)([^`]*)`");
      for (auto it = std::sregex_iterator(cell.begin(), cell.end(), form); it != std::sregex_iterator(); ++it)
        out[lower((*it)[1])] += " " + (*it)[2].str();
    }
  }
  return out;
}

// A RESP3 map's entry (maps are flat k1, v1, ... in Resp3Value); hiredis 0.14 cannot read these replies
// (nested deeper than 7), so the suite speaks RESP3 through the harness's own client.
const Resp3Value* field(const Resp3Value& m, const std::string& key) {
  for (size_t i = 0; i + 1 < m.elems.size(); i += 2)
    if (m.elems[i].str == key) return &m.elems[i + 1];
  return nullptr;
}

void collect_tokens(const Resp3Value* args, std::set<std::string>* tokens, int* count) {
  for (size_t i = 0; args && i < args->elems.size(); ++i) {
    const Resp3Value& a = args->elems[i];
    ++*count;
    if (const Resp3Value* t = field(a, "token")) tokens->insert(t->str);
    collect_tokens(field(a, "arguments"), tokens, count);
  }
}

// One argument of `args` by name.
const Resp3Value* arg(const Resp3Value* args, const std::string& name) {
  for (size_t i = 0; args && i < args->elems.size(); ++i)
    if (const Resp3Value* n = field(args->elems[i], "name"); n && n->str == name) return &args->elems[i];
  return nullptr;
}

std::set<std::string> flags(const Resp3Value* a) {
  std::set<std::string> out;
  if (const Resp3Value* f = a ? field(*a, "flags") : nullptr)
    for (const Resp3Value& v : f->elems) out.insert(v.str);
  return out;
}

TEST(CommandDocs, EveryCommandHasItsGrammarAndTheDocsAgree) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL", "stories", stories_model_path()}});
  Resp3Client c(server.port());
  const Resp3Value list = c.call({"COMMAND", "LIST", "FILTERBY", "MODULE", "infer"});
  ASSERT_GE(list.elems.size(), 20u);
  const auto usages = documented_usages();
  for (const Resp3Value& n : list.elems) {
    const std::string name = n.str;
    SCOPED_TRACE(name);
    const Resp3Value docs = c.call({"COMMAND", "DOCS", name});
    ASSERT_EQ(docs.type, '%');
    ASSERT_EQ(docs.elems.size(), 2u);
    const Resp3Value& d = docs.elems[1];
    ASSERT_NE(field(d, "summary"), nullptr);
    ASSERT_NE(field(d, "complexity"), nullptr);
    std::set<std::string> tokens;
    int count = 0;
    collect_tokens(field(d, "arguments"), &tokens, &count);
    if (name != "infer.models") {
      EXPECT_GT(count, 0) << "no arguments tree";
    }
    if (name == "infer.streamstate") continue;  // internal: not in the user docs
    ASSERT_EQ(usages.count(name), 1u) << "not in docs/redis.md or docs/vector.md";
    const std::string usage = usages.at(name);
    std::set<std::string> words, keywords;
    std::regex word("[A-Za-z][A-Za-z0-9_-]*");  // q8_0 is one word
    for (auto it = std::sregex_iterator(usage.begin(), usage.end(), word); it != std::sregex_iterator(); ++it) {
      const std::string w = it->str();
      words.insert(lower(w));
      bool upper = true;
      for (char ch : w) upper = upper && !std::islower(static_cast<unsigned char>(ch));
      if (upper && w.size() > 1) keywords.insert(w);
    }
    for (const std::string& k : keywords) EXPECT_EQ(tokens.count(k), 1u) << k << " is documented but not in COMMAND DOCS";
    for (const std::string& t : tokens) EXPECT_EQ(words.count(lower(t)), 1u) << t << " is in COMMAND DOCS but not documented";
  }
}

TEST(CommandDocs, GenerateTreeHasTheShapeOfItsGrammar) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL", "stories", stories_model_path()}});
  Resp3Client c(server.port());
  const Resp3Value docs = c.call({"COMMAND", "DOCS", "infer.generate"});
  ASSERT_EQ(docs.elems.size(), 2u);
  const Resp3Value* args = field(docs.elems[1], "arguments");
  // The prompt is one of five forms; TOKENS takes one or more keys of key spec 0.
  const Resp3Value* prompt = arg(args, "text");
  ASSERT_NE(prompt, nullptr);
  EXPECT_EQ(field(*prompt, "type")->str, "oneof");
  const Resp3Value* tokens = arg(field(*prompt, "arguments"), "tokens");
  ASSERT_NE(tokens, nullptr);
  const Resp3Value* key = arg(field(*tokens, "arguments"), "key");
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(field(*key, "token")->str, "TOKENS");
  EXPECT_EQ(field(*key, "key_spec_index")->integer, 0);
  EXPECT_EQ(flags(key), std::set<std::string>({"multiple"}));
  // STOP repeats with its token; the output constraint is an optional one of three.
  EXPECT_EQ(flags(arg(args, "stop")), std::set<std::string>({"optional", "multiple_token"}));
  const Resp3Value* constraint = arg(args, "format");
  ASSERT_NE(constraint, nullptr);
  EXPECT_EQ(field(*constraint, "type")->str, "oneof");
  EXPECT_EQ(field(*constraint, "arguments")->elems.size(), 3u);
  EXPECT_EQ(field(*arg(args, "key"), "key_spec_index")->integer, 1);  // STREAM key: spec 1
}

}  // namespace
}  // namespace infer::test
