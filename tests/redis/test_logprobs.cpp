// LOGPROBS n on INFER.GENERATE and INFER.RAG through a real redis-server with stories260K: the reply's
// `logprobs` field in RESP2 and RESP3, what its values must satisfy (<= 0, sorted alternatives, the
// chosen token's value equal to its value in the list, greedy output is the top token), STREAM entries
// with their `logprobs` JSON, and every error of the option.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "redis/redis_server.h"
#include "support/data_dirs.h"
#include "support/story_documents.h"

namespace infer::test {
namespace {

struct Token {
  long long id = -1;
  std::string piece;
  double logprob = 0;
};
struct Entry {
  Token token;
  std::vector<Token> top;
};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string text_of(const redisReply* r) { return std::string(r->str, r->len); }

// A RESP2 map (a flat array) as name → value.
const redisReply* field(const redisReply* map, const std::string& name) {
  if (!map || map->type != REDIS_REPLY_ARRAY) return nullptr;
  for (size_t i = 0; i + 1 < map->elements; i += 2)
    if (text_of(map->element[i]) == name) return map->element[i + 1];
  return nullptr;
}

Token token_of(const redisReply* m) {
  EXPECT_EQ(m->type, REDIS_REPLY_ARRAY);
  Token t;
  const redisReply* id = field(m, "id");
  const redisReply* piece = field(m, "token");
  const redisReply* logprob = field(m, "logprob");
  if (!id || !piece || !logprob) {
    ADD_FAILURE() << "token map without id, token or logprob: " << show(m);
    return t;
  }
  t.id = id->integer;
  t.piece = text_of(piece);
  t.logprob = std::stod(text_of(logprob));  // RESP2 sends a double as a bulk string
  return t;
}

// The `logprobs` field of a RESP2 reply.
std::vector<Entry> logprobs_of(const redisReply* reply) {
  std::vector<Entry> out;
  const redisReply* list = field(reply, "logprobs");
  if (!list || list->type != REDIS_REPLY_ARRAY) {
    ADD_FAILURE() << "no logprobs array in " << show(reply);
    return out;
  }
  for (size_t i = 0; i < list->elements; ++i) {
    const redisReply* m = list->element[i];
    EXPECT_EQ(m->elements, 8u) << show(m);  // id, token, logprob, top_logprobs
    Entry e;
    e.token = token_of(m);
    const redisReply* top = field(m, "top_logprobs");
    if (!top) {
      ADD_FAILURE() << "no top_logprobs in " << show(m);
      continue;
    }
    for (size_t k = 0; k < top->elements; ++k) {
      EXPECT_EQ(top->element[k]->elements, 6u) << show(top->element[k]);
      e.top.push_back(token_of(top->element[k]));
    }
    out.push_back(e);
  }
  return out;
}

// What every reply's logprobs must satisfy; `greedy`: the chosen token is the top one.
void expect_well_formed(const std::vector<Entry>& entries, size_t n_top, bool greedy) {
  for (size_t s = 0; s < entries.size(); ++s) {
    const Entry& e = entries[s];
    EXPECT_LE(e.token.logprob, 0.0) << "step " << s;
    ASSERT_EQ(e.top.size(), n_top) << "step " << s;
    for (size_t k = 0; k < e.top.size(); ++k) {
      EXPECT_LE(e.top[k].logprob, 0.0);
      if (k > 0) {
        EXPECT_GE(e.top[k - 1].logprob, e.top[k].logprob) << "step " << s << " rank " << k;
      }
      if (e.top[k].id == e.token.id) {
        EXPECT_EQ(e.top[k].logprob, e.token.logprob) << "step " << s;
        EXPECT_EQ(e.top[k].piece, e.token.piece);
      }
    }
    if (greedy && !e.top.empty()) {
      EXPECT_EQ(e.top[0].id, e.token.id) << "step " << s;
      EXPECT_EQ(e.top[0].logprob, e.token.logprob) << "step " << s;
    }
  }
}

const std::vector<std::string> kGreedy = {"MAXTOKENS", "24", "TEMP", "0"};

class LogprobsTest : public SharedServerTest<LogprobsTest> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  Reply generate(const std::vector<std::string>& args) {
    Reply r = command(c_.get(), cat({"INFER.GENERATE", "stories"}, args));
    EXPECT_TRUE(r && r->type == REDIS_REPLY_ARRAY) << show(r.get());
    return r;
  }
};

TEST_F(LogprobsTest, GreedyReplyInResp2) {
  const std::string plain = run(cat({"INFER.GENERATE", "stories", "PROMPT", "Once upon a time"}, kGreedy));
  Reply r = generate(cat({"PROMPT", "Once upon a time", "LOGPROBS", "5"}, kGreedy));
  ASSERT_EQ(r->elements, 4u) << show(r.get());  // text, logprobs
  EXPECT_EQ(text_of(r->element[0]), "text");
  EXPECT_EQ(text_of(r->element[1]), plain);  // LOGPROBS changes nothing else
  const std::vector<Entry> entries = logprobs_of(r.get());
  ASSERT_EQ(entries.size(), 24u);
  expect_well_formed(entries, 5, /*greedy=*/true);
  // Plain story text: the pieces joined are the text.
  std::string joined;
  for (const Entry& e : entries) joined += e.token.piece;
  EXPECT_EQ(joined, plain);
}

TEST_F(LogprobsTest, ShapesInResp3) {
  Resp3Client c3(server_->port());
  Resp3Value v = c3.call(cat({"INFER.GENERATE", "stories", "PROMPT", "Once", "LOGPROBS", "2"}, kGreedy));
  ASSERT_EQ(v.type, '%');
  ASSERT_EQ(v.elems.size(), 4u);
  EXPECT_EQ(v.elems[0].str, "text");
  EXPECT_EQ(v.elems[2].str, "logprobs");
  const Resp3Value& list = v.elems[3];
  ASSERT_EQ(list.type, '*');
  ASSERT_EQ(list.elems.size(), 24u);
  for (const Resp3Value& m : list.elems) {
    ASSERT_EQ(m.type, '%');
    ASSERT_EQ(m.elems.size(), 8u);
    EXPECT_EQ(m.elems[0].str, "id");
    EXPECT_EQ(m.elems[1].type, ':');
    EXPECT_EQ(m.elems[2].str, "token");
    EXPECT_EQ(m.elems[3].type, '$');
    EXPECT_EQ(m.elems[4].str, "logprob");
    EXPECT_EQ(m.elems[5].type, ',');  // a RESP3 double
    EXPECT_LE(std::stod(m.elems[5].str), 0.0);
    EXPECT_EQ(m.elems[6].str, "top_logprobs");
    ASSERT_EQ(m.elems[7].type, '*');
    ASSERT_EQ(m.elems[7].elems.size(), 2u);
    for (const Resp3Value& a : m.elems[7].elems) {
      ASSERT_EQ(a.type, '%');
      ASSERT_EQ(a.elems.size(), 6u);
      EXPECT_EQ(a.elems[0].str, "id");
      EXPECT_EQ(a.elems[4].str, "logprob");
      EXPECT_EQ(a.elems[5].type, ',');
    }
    // Greedy: the top alternative is the token.
    EXPECT_EQ(m.elems[7].elems[0].elems[1].integer, m.elems[1].integer);
    EXPECT_EQ(m.elems[7].elems[0].elems[5].str, m.elems[5].str);
  }
  // Without LOGPROBS the reply stays a plain string.
  EXPECT_EQ(c3.call(cat({"INFER.GENERATE", "stories", "PROMPT", "Once"}, kGreedy)).type, '$');
}

TEST_F(LogprobsTest, ZeroGivesTheTokenWithoutAlternatives) {
  Reply r = generate(cat({"PROMPT", "Once upon a time", "LOGPROBS", "0"}, kGreedy));
  const std::vector<Entry> entries = logprobs_of(r.get());
  ASSERT_EQ(entries.size(), 24u);
  expect_well_formed(entries, 0, true);
  // The same values as with alternatives.
  const Reply r20 = generate(cat({"PROMPT", "Once upon a time", "LOGPROBS", "20"}, kGreedy));
  const std::vector<Entry> with20 = logprobs_of(r20.get());
  ASSERT_EQ(with20.size(), 24u);
  expect_well_formed(with20, 20, true);
  for (size_t s = 0; s < entries.size(); ++s) {
    EXPECT_EQ(entries[s].token.id, with20[s].token.id);
    EXPECT_EQ(entries[s].token.logprob, with20[s].token.logprob);
  }
}

TEST_F(LogprobsTest, WithStatsTheFieldFollowsTheStats) {
  Reply r = generate(cat({"PROMPT", "Once", "WITHSTATS", "LOGPROBS", "1"}, kGreedy));
  ASSERT_EQ(r->elements, 24u) << show(r.get());  // text + 10 stats fields + logprobs
  EXPECT_EQ(text_of(r->element[22]), "logprobs");
  const redisReply* ids = field(r.get(), "ids");
  ASSERT_TRUE(ids);
  const std::vector<Entry> entries = logprobs_of(r.get());
  ASSERT_EQ(entries.size(), ids->elements);
  for (size_t s = 0; s < entries.size(); ++s) EXPECT_EQ(entries[s].token.id, ids->element[s]->integer);
}

// Sampling at temperature 1 draws tokens that are not the most likely; their values are still the raw
// distribution's (the same value as in the alternatives list, never renormalised over top-k).
TEST_F(LogprobsTest, SampledTokensKeepTheRawDistributionsValues) {
  const std::vector<std::string> sampled = {"PROMPT", "Once", "MAXTOKENS", "40", "TEMP", "1", "SEED", "7"};
  const std::string plain = run(cat({"INFER.GENERATE", "stories"}, sampled));
  Reply r = generate(cat(sampled, {"LOGPROBS", "20"}));
  EXPECT_EQ(text_of(field(r.get(), "text")), plain);
  const std::vector<Entry> entries = logprobs_of(r.get());
  ASSERT_EQ(entries.size(), 40u);
  expect_well_formed(entries, 20, false);
  int not_top = 0;
  for (const Entry& e : entries) not_top += e.top[0].id != e.token.id;
  EXPECT_GT(not_top, 0);  // the check above met sampled tokens
  // The distribution sums to at most 1 over the alternatives.
  for (const Entry& e : entries) {
    double p = 0;
    for (const Token& t : e.top) p += std::exp(t.logprob);
    EXPECT_LE(p, 1.0 + 1e-6);
  }
}

TEST_F(LogprobsTest, StreamEntriesCarryTheTokensLogprobs) {
  run({"DEL", "lp:out", "lp:plain"});
  Reply r = generate(cat({"PROMPT", "Once upon a time", "LOGPROBS", "3", "STREAM", "lp:out"}, kGreedy));
  const std::vector<Entry> replied = logprobs_of(r.get());
  ASSERT_EQ(replied.size(), 24u);
  Reply entries = command(c_.get(), {"XRANGE", "lp:out", "-", "+"});
  ASSERT_EQ(entries->type, REDIS_REPLY_ARRAY);
  ASSERT_GE(entries->elements, 2u);
  std::string streamed;
  std::vector<nlohmann::json> tokens;
  for (size_t i = 0; i + 1 < entries->elements; ++i) {
    const redisReply* fields = entries->element[i]->element[1];
    ASSERT_EQ(fields->elements, 4u) << show(fields);
    ASSERT_EQ(text_of(fields->element[0]), "text");
    streamed += text_of(fields->element[1]);
    ASSERT_EQ(text_of(fields->element[2]), "logprobs");
    const auto list = nlohmann::json::parse(text_of(fields->element[3]));
    ASSERT_TRUE(list.is_array());
    for (const auto& t : list) tokens.push_back(t);
  }
  EXPECT_EQ(streamed, text_of(field(r.get(), "text")));
  EXPECT_EQ(show(entries->element[entries->elements - 1]->element[1]), "[finish, length, tokens, 24]");
  ASSERT_EQ(tokens.size(), replied.size());
  for (size_t s = 0; s < tokens.size(); ++s) {
    const nlohmann::json& t = tokens[s];
    EXPECT_EQ(t["id"].get<long long>(), replied[s].token.id);
    EXPECT_EQ(t["token"].get<std::string>(), replied[s].token.piece);
    std::string bytes;
    for (int b : t["bytes"]) bytes += static_cast<char>(b);
    EXPECT_EQ(bytes, replied[s].token.piece);
    // The same float, printed two ways.
    EXPECT_EQ(t["logprob"].get<float>(), static_cast<float>(replied[s].token.logprob));
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(t["top_logprobs"][k]["id"].get<long long>(), replied[s].top[k].id);
      EXPECT_EQ(t["top_logprobs"][k]["logprob"].get<float>(), static_cast<float>(replied[s].top[k].logprob));
    }
  }
  // Without LOGPROBS the entries keep their one field.
  run(cat({"INFER.GENERATE", "stories", "PROMPT", "Once upon a time", "STREAM", "lp:plain"}, kGreedy));
  Reply plain = command(c_.get(), {"XRANGE", "lp:plain", "-", "+"});
  ASSERT_GE(plain->elements, 2u);
  for (size_t i = 0; i + 1 < plain->elements; ++i) EXPECT_EQ(plain->element[i]->element[1]->elements, 2u);
}

TEST_F(LogprobsTest, RagRepliesWithLogprobs) {
  run({"DEL", "lp:kb"});
  for (size_t i = 0; i < 3; ++i) {
    const std::string key = "lp:doc:" + std::to_string(i);
    ASSERT_EQ(run({"INFER.TOKENIZE", "stories", kStoryDocuments[i], "STORE", key}).find("(error)"), std::string::npos);
    ASSERT_EQ(run({"INFER.EMBED", "stories", kStoryDocuments[i], "STORE", "lp:kb", "e" + std::to_string(i), "SETATTR",
                   "{\"tokens\": \"" + key + "\"}"}),
              "1");
  }
  const std::vector<std::string> rag = {"INFER.RAG", "stories", "lp:kb", "QUERY", kStoryDocuments[1],
                                        "COUNT",     "2",       "TEMP",  "0",     "MAXTOKENS",
                                        "12"};
  const std::string plain = run(rag);
  Reply r = command(c_.get(), cat(rag, {"LOGPROBS", "4", "WITHSOURCES"}));
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
  ASSERT_EQ(r->elements, 8u) << show(r.get());  // text, logprobs, sources, prompt_tokens
  EXPECT_EQ(text_of(r->element[1]), plain);
  EXPECT_EQ(text_of(r->element[2]), "logprobs");
  EXPECT_EQ(text_of(r->element[4]), "sources");
  EXPECT_EQ(text_of(r->element[6]), "prompt_tokens");
  const std::vector<Entry> entries = logprobs_of(r.get());
  ASSERT_EQ(entries.size(), 12u);
  expect_well_formed(entries, 4, true);

  Resp3Client c3(server_->port());
  Resp3Value v = c3.call(cat(rag, {"LOGPROBS", "1"}));
  ASSERT_EQ(v.type, '%');
  ASSERT_EQ(v.elems.size(), 4u);
  EXPECT_EQ(v.elems[2].str, "logprobs");
  EXPECT_EQ(v.elems[3].elems.size(), 12u);
  // Errors are the shared option's.
  EXPECT_EQ(run(cat(rag, {"LOGPROBS", "21"})), "(error) ERR LOGPROBS must be an integer in [0, 20]");
  EXPECT_EQ(run(cat(rag, {"LOGPROBS", "1", "LOGPROBS", "2"})), "(error) ERR LOGPROBS given twice");
}

TEST_F(LogprobsTest, BadValuesGiveClearErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const Case cases[] = {
      {{"LOGPROBS", "21"}, "ERR LOGPROBS must be an integer in [0, 20]"},
      {{"LOGPROBS", "-1"}, "ERR LOGPROBS must be an integer in [0, 20]"},
      {{"LOGPROBS", "five"}, "ERR LOGPROBS must be an integer in [0, 20]"},
      {{"LOGPROBS", "1.5"}, "ERR LOGPROBS must be an integer in [0, 20]"},
      {{"LOGPROBS", ""}, "ERR LOGPROBS must be an integer in [0, 20]"},
      {{"LOGPROBS"}, "ERR LOGPROBS needs a value"},
      {{"LOGPROBS", "1", "LOGPROBS", "1"}, "ERR LOGPROBS given twice"},
  };
  for (const Case& c : cases) {
    const std::string r = run(cat({"INFER.GENERATE", "stories", "PROMPT", "Once"}, c.args));
    EXPECT_EQ(r, "(error) " + c.error) << c.args.back();
  }
  // LOGPROBS is a keyword: it ends a TOKENS key list.
  run({"INFER.TOKENIZE", "stories", "Once upon a time", "STORE", "lp:tokens"});
  Reply r = command(c_.get(), cat({"INFER.GENERATE", "stories", "TOKENS", "lp:tokens", "LOGPROBS", "1"}, kGreedy));
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << show(r.get());
  EXPECT_EQ(logprobs_of(r.get()).size(), 24u);
  EXPECT_EQ(run({"PING"}), "PONG");
}

}  // namespace
}  // namespace infer::test
