// INFER.GENERATE / INFER.RAG ... CACHE key [THRESHOLD s] [TTL seconds] [SAMPLED] through a real
// redis-server with stories260K: miss then hit (no generation on a hit), similarity threshold,
// fingerprints, expiry (lazy and by the sweep), TEMP bypass and SAMPLED, RAG, STREAM, RESP3, errors, key
// specs, and a replica and an AOF reload keeping the cache.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A RESP2 map reply (flat array) as field → reply text.
std::map<std::string, std::string> fields(const redisReply* r) {
  std::map<std::string, std::string> out;
  if (r->type != REDIS_REPLY_ARRAY) return {{"error", show(r)}};
  for (size_t i = 0; i + 1 < r->elements; i += 2)
    out[std::string(r->element[i]->str, r->element[i]->len)] =
        r->element[i + 1]->type == REDIS_REPLY_STRING
            ? std::string(r->element[i + 1]->str, r->element[i + 1]->len)
            : show(r->element[i + 1]);
  return out;
}

long long stat(redisContext* c, const std::string& name) {
  Reply r = command(c, {"INFER.STATS"});
  const auto f = fields(r.get());
  auto it = f.find(name);
  return it == f.end() ? -1 : std::atoll(it->second.c_str());
}

const std::vector<std::string> kGreedy = {"TEMP", "0", "MAXTOKENS", "8"};
const std::string kPrompt = "Once upon a time there was a little dog.";
const std::string kNear = "Once upon a time there was a small dog.";
const std::string kFar = "What is the capital of France?";

class SemanticCacheTest : public SharedServerTest<SemanticCacheTest> {
 public:
  static std::vector<std::string> module_args() { return {"MODEL", "stories", stories_model_path()}; }

 protected:
  // INFER.GENERATE stories PROMPT `prompt` greedy, CACHE `key` `cache_options`, WITHSTATS, `more`.
  std::map<std::string, std::string> generate(const std::string& prompt, const std::string& key,
                                              const std::vector<std::string>& more = {}) {
    Reply r = command(c_.get(), cat(cat({"INFER.GENERATE", "stories", "PROMPT", prompt, "CACHE", key}, more),
                                    cat(kGreedy, {"WITHSTATS"})));
    return fields(r.get());
  }
  double cosine(const std::string& a, const std::string& b) {
    auto vec = [&](const std::string& t) {
      Reply r = command(c_.get(), {"INFER.EMBED", "stories", t, "NORMALIZE", "ARRAY"});
      std::vector<double> v;
      for (size_t i = 0; i < r->elements; ++i) v.push_back(std::stod(r->element[i]->str));
      return v;
    };
    const auto x = vec(a), y = vec(b);
    double dot = 0;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) dot += x[i] * y[i];
    return dot;
  }
};

TEST_F(SemanticCacheTest, MissStoresThenTheSameRequestHitsWithoutGenerating) {
  run({"DEL", "cache:1"});
  const auto miss = generate(kPrompt, "cache:1");
  ASSERT_EQ(miss.count("error"), 0u) << miss.at("error");
  EXPECT_EQ(miss.at("cached"), "0");
  EXPECT_EQ(miss.count("cache_similarity"), 0u);
  EXPECT_EQ(run({"INFER.VCARD", "cache:1"}), "1");  // stored before the reply

  const long long generated = stat(c_.get(), "generate_requests");
  const long long completed = stat(c_.get(), "completed");
  const long long hits = stat(c_.get(), "cache_hits");
  const auto hit = generate(kPrompt, "cache:1");
  EXPECT_EQ(hit.at("cached"), "1");
  EXPECT_EQ(hit.at("text"), miss.at("text"));
  EXPECT_EQ(hit.at("finish"), miss.at("finish"));
  EXPECT_EQ(hit.at("ids"), miss.at("ids"));
  EXPECT_EQ(hit.at("generated_tokens"), miss.at("generated_tokens"));
  EXPECT_NEAR(std::stod(hit.at("cache_similarity")), 1.0, 0.01);
  EXPECT_EQ(stat(c_.get(), "generate_requests"), generated);  // nothing generated
  EXPECT_EQ(stat(c_.get(), "completed"), completed + 1);      // only the prompt's embedding ran
  EXPECT_EQ(stat(c_.get(), "cache_hits"), hits + 1);
  EXPECT_EQ(info_number(c_.get(), "infer", "infer_cache_hits"), hits + 1);
  // Without WITHSTATS a hit replies like a generation: the text alone.
  EXPECT_EQ(run(cat({"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:1"}, kGreedy)), miss.at("text"));
  EXPECT_EQ(run({"INFER.VCARD", "cache:1"}), "1");
}

TEST_F(SemanticCacheTest, ANearParaphraseHitsAFarPromptMisses) {
  const double near = cosine(kPrompt, kNear), far = cosine(kPrompt, kFar);
  ASSERT_GE(near, 0.97) << "stories260K's embeddings changed: pick other prompts";
  ASSERT_LT(far, 0.9);
  run({"DEL", "cache:2"});
  const auto first = generate(kPrompt, "cache:2");
  ASSERT_EQ(first.at("cached"), "0");
  const auto paraphrase = generate(kNear, "cache:2");
  EXPECT_EQ(paraphrase.at("cached"), "1");
  EXPECT_EQ(paraphrase.at("text"), first.at("text"));
  EXPECT_NEAR(std::stod(paraphrase.at("cache_similarity")), near, 0.02);  // Q8 storage
  EXPECT_EQ(generate(kFar, "cache:2").at("cached"), "0");
  // THRESHOLD above the paraphrase's similarity: a miss (stored as an entry of its own).
  EXPECT_EQ(generate(kNear, "cache:2", {"THRESHOLD", "0.9999"}).at("cached"), "0");
  EXPECT_EQ(run({"INFER.VCARD", "cache:2"}), "3");
}

TEST_F(SemanticCacheTest, AnotherFingerprintMisses) {
  run({"DEL", "cache:3"});
  ASSERT_EQ(generate(kPrompt, "cache:3").at("cached"), "0");
  // Another MAXTOKENS, output constraint, STOP, sampling option:
  Reply r = command(c_.get(), {"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:3", "TEMP", "0",
                               "MAXTOKENS", "5", "WITHSTATS"});
  EXPECT_EQ(fields(r.get()).at("cached"), "0");
  EXPECT_EQ(generate(kPrompt, "cache:3", {"FORMAT", "json"}).at("cached"), "0");
  EXPECT_EQ(generate(kPrompt, "cache:3", {"STOP", "dog"}).at("cached"), "0");
  EXPECT_EQ(generate(kPrompt, "cache:3", {"TOPK", "5"}).at("cached"), "0");
  // A chat of the same words is another prompt kind.
  r = command(c_.get(), cat({"INFER.GENERATE", "stories", "CHAT", "user", kPrompt, "TEMPLATE", "chatml", "CACHE", "cache:3", "WITHSTATS"},
                            kGreedy));
  EXPECT_EQ(fields(r.get()).at("cached"), "0");
  // Each of them is a hit the second time, and the first request still is.
  EXPECT_EQ(generate(kPrompt, "cache:3", {"FORMAT", "json"}).at("cached"), "1");
  EXPECT_EQ(generate(kPrompt, "cache:3").at("cached"), "1");
  r = command(c_.get(), cat({"INFER.GENERATE", "stories", "CHAT", "user", kPrompt, "TEMPLATE", "chatml", "CACHE", "cache:3", "WITHSTATS"},
                            kGreedy));
  EXPECT_EQ(fields(r.get()).at("cached"), "1");
}

TEST_F(SemanticCacheTest, SampledRequestsBypassUnlessSampled) {
  run({"DEL", "cache:4"});
  const long long bypassed = stat(c_.get(), "cache_bypassed");
  Reply r = command(c_.get(), {"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:4", "TEMP", "0.7",
                               "MAXTOKENS", "8", "WITHSTATS"});
  EXPECT_EQ(fields(r.get()).at("cached"), "0");
  EXPECT_EQ(run({"EXISTS", "cache:4"}), "0");  // nothing stored
  EXPECT_EQ(stat(c_.get(), "cache_bypassed"), bypassed + 1);
  const std::vector<std::string> sampled = {"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:4",
                                            "SAMPLED", "TEMP", "0.7", "MAXTOKENS", "8", "WITHSTATS"};
  const auto first = fields(command(c_.get(), sampled).get());
  EXPECT_EQ(first.at("cached"), "0");
  EXPECT_EQ(run({"INFER.VCARD", "cache:4"}), "1");
  const auto second = fields(command(c_.get(), sampled).get());
  EXPECT_EQ(second.at("cached"), "1");
  EXPECT_EQ(second.at("text"), first.at("text"));
  EXPECT_EQ(second.at("seed"), first.at("seed"));
  // LOGPROBS bypasses too: the cache keeps no log-probabilities.
  r = command(c_.get(), cat({"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:4", "LOGPROBS", "1",
                             "WITHSTATS"}, kGreedy));
  EXPECT_EQ(fields(r.get()).at("cached"), "0");
}

TEST_F(SemanticCacheTest, AnExpiredEntryMissesAndIsReplaced) {
  run({"DEL", "cache:5"});
  ASSERT_EQ(generate(kPrompt, "cache:5", {"TTL", "1"}).at("cached"), "0");
  EXPECT_EQ(generate(kPrompt, "cache:5", {"TTL", "1"}).at("cached"), "1");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const long long generated = stat(c_.get(), "generate_requests");
  EXPECT_EQ(generate(kPrompt, "cache:5", {"TTL", "1"}).at("cached"), "0");
  EXPECT_EQ(stat(c_.get(), "generate_requests"), generated + 1);
  EXPECT_EQ(run({"INFER.VCARD", "cache:5"}), "1");  // the expired entry went, the new one came
  EXPECT_EQ(generate(kPrompt, "cache:5", {"TTL", "1"}).at("cached"), "1");
}

// A cache set at infer.vsim-thread-threshold or above is searched on the search threads: the miss goes
// on to generate from the main thread, the hit completes from the search thread, as on the main thread.
TEST_F(SemanticCacheTest, LookupsOnTheSearchThreadsMissThenHit) {
  run({"DEL", "cache:threads"});
  const std::string before = run({"CONFIG", "GET", "infer.vsim-thread-threshold"});
  ASSERT_EQ(run({"CONFIG", "SET", "infer.vsim-thread-threshold", "1"}), "OK");
  ASSERT_EQ(generate(kFar, "cache:threads").at("cached"), "0");  // an empty key: no search
  ASSERT_EQ(run({"INFER.VCARD", "cache:threads"}), "1");
  const auto miss = generate(kPrompt, "cache:threads");  // one entry, another prompt: searched, missed
  ASSERT_EQ(miss.count("error"), 0u) << miss.at("error");
  EXPECT_EQ(miss.at("cached"), "0");
  const auto hit = generate(kPrompt, "cache:threads");
  EXPECT_EQ(hit.at("cached"), "1");
  EXPECT_EQ(hit.at("text"), miss.at("text"));
  EXPECT_EQ(run({"INFER.VCARD", "cache:threads"}), "2");
  const std::string value = before.substr(before.rfind(' ') + 1, before.size() - before.rfind(' ') - 2);
  EXPECT_EQ(run({"CONFIG", "SET", "infer.vsim-thread-threshold", value}), "OK") << before;
}

TEST_F(SemanticCacheTest, TheSweepRemovesExpiredEntries) {
  run({"DEL", "cache:6"});
  const long long removed = stat(c_.get(), "cache_expired_removed");
  for (const std::string& p : {kPrompt, kFar, std::string("Lily likes to eat apples.")})
    ASSERT_EQ(generate(p, "cache:6", {"TTL", "1"}).at("cached"), "0");
  ASSERT_EQ(generate("Tom played with his red ball.", "cache:6").at("cached"), "0");  // no TTL: stays
  ASSERT_EQ(run({"INFER.VCARD", "cache:6"}), "4");
  // No request touches the key: only the sweep can remove the three.
  EXPECT_TRUE(wait_until([&] { return run({"INFER.VCARD", "cache:6"}) == "1"; }, std::chrono::milliseconds(5000)));
  EXPECT_GE(stat(c_.get(), "cache_expired_removed"), removed + 3);  // (other tests' entries may expire too)
  EXPECT_EQ(generate("Tom played with his red ball.", "cache:6").at("cached"), "1");
}

TEST_F(SemanticCacheTest, StreamOnAHitWritesTheAnswerAndAFinish) {
  run({"DEL", "cache:7", "out:a", "out:b"});
  const std::string text = run(cat({"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:7", "STREAM", "out:a"}, kGreedy));
  const std::string again = run(cat({"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:7", "STREAM", "out:b"}, kGreedy));
  EXPECT_EQ(again, text);
  Reply entries = command(c_.get(), {"XRANGE", "out:b", "-", "+"});
  ASSERT_EQ(entries->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(entries->elements, 2u) << show(entries.get());
  EXPECT_EQ(show(entries->element[0]->element[1]), "[text, " + text + "]");
  EXPECT_EQ(show(entries->element[1]->element[1]), "[finish, length, tokens, 8]");
}

TEST_F(SemanticCacheTest, RagWithCacheHitsWithTheSameSources) {
  run({"DEL", "kb", "doc:1", "cache:8"});
  run({"INFER.TOKENIZE", "stories", "The bird sang a song.", "STORE", "doc:1"});
  ASSERT_EQ(run({"INFER.EMBED", "stories", "The bird sang a song.", "STORE", "kb", "d1", "SETATTR", R"({"tokens":"doc:1"})"}), "1");
  const std::vector<std::string> rag = cat({"INFER.RAG", "stories", "kb", "QUERY", "What did the bird do?", "CACHE",
                                            "cache:8", "WITHSOURCES", "WITHSTATS"}, kGreedy);
  const auto miss = fields(command(c_.get(), rag).get());
  ASSERT_EQ(miss.at("cached"), "0");
  const long long generated = stat(c_.get(), "generate_requests");
  const auto hit = fields(command(c_.get(), rag).get());
  EXPECT_EQ(hit.at("cached"), "1");
  EXPECT_EQ(hit.at("text"), miss.at("text"));
  EXPECT_EQ(hit.at("sources"), miss.at("sources"));
  EXPECT_EQ(hit.at("prompt_tokens"), miss.at("prompt_tokens"));
  EXPECT_EQ(stat(c_.get(), "generate_requests"), generated);
  // Other retrieval options are another fingerprint.
  EXPECT_EQ(fields(command(c_.get(), cat(rag, {"COUNT", "2"})).get()).at("cached"), "0");
}

TEST_F(SemanticCacheTest, Resp3HitIsAMap) {
  run({"DEL", "cache:9"});
  generate(kPrompt, "cache:9");
  Resp3Client c3(server_->port());
  Resp3Value v = c3.call(cat({"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:9", "WITHSTATS"}, kGreedy));
  ASSERT_EQ(v.type, '%');
  std::map<std::string, Resp3Value> m;
  for (size_t i = 0; i + 1 < v.elems.size(); i += 2) m[v.elems[i].str] = v.elems[i + 1];
  EXPECT_EQ(m["cached"].type, ':');
  EXPECT_EQ(m["cached"].integer, 1);
  EXPECT_EQ(m["cache_similarity"].type, ',');
  EXPECT_EQ(m["finish"].str, "length");
}

TEST_F(SemanticCacheTest, Errors) {
  auto gen = [&](std::vector<std::string> more) {
    return run(cat({"INFER.GENERATE", "stories", "PROMPT", "x", "TEMP", "0"}, more));
  };
  EXPECT_EQ(gen({"CACHE", "a", "CACHE", "b"}), "(error) ERR CACHE given twice");
  EXPECT_EQ(gen({"CACHE", "a", "TTL", "5", "TTL", "6"}), "(error) ERR TTL given twice");
  EXPECT_EQ(gen({"CACHE", "a", "THRESHOLD", "1.5"}), "(error) ERR THRESHOLD must be a number in [-1, 1]");
  EXPECT_EQ(gen({"CACHE", "a", "TTL", "0"}), "(error) ERR TTL must be an integer in [1, 316224000]");
  EXPECT_NE(gen({"CACHE"}).find("CACHE needs a key"), std::string::npos);
  EXPECT_NE(gen({"CACHE", "MAXTOKENS", "3"}).find("CACHE needs a key"), std::string::npos);
  EXPECT_EQ(gen({"THRESHOLD", "0.5"}), "(error) ERR unknown option 'THRESHOLD' (THRESHOLD, TTL and SAMPLED follow CACHE key)");
  run({"SET", "not:a:set", "1"});
  EXPECT_EQ(gen({"CACHE", "not:a:set"}), "(error) WRONGTYPE CACHE key holds a value that is not a vector set");
  run({"DEL", "small:set"});
  run({"INFER.VADD", "small:set", "VALUES", "3", "1", "0", "0", "e"});
  EXPECT_NE(gen({"CACHE", "small:set"}).find("CACHE: vector dimension mismatch"), std::string::npos);
  run({"INFER.TOKENIZE", "stories", "Hello", "STORE", "tok:1"});
  EXPECT_NE(run({"INFER.GENERATE", "stories", "TOKENS", "tok:1", "CACHE", "a"}).find("a TOKENS prompt is not cached"),
            std::string::npos);
  EXPECT_NE(run({"INFER.RAG", "stories", "kb", "QUERY", "x", "CACHE", "a", "CACHE", "b"}).find("CACHE given twice"),
            std::string::npos);
  // TOOLS (and schemas) are hashed into the fingerprint on the main thread: bounded.
  const std::string tools = "[" + std::string(1 << 20, ' ') + "]";
  EXPECT_NE(run({"INFER.GENERATE", "stories", "CHAT", "user", "hi", "TEMPLATE", "chatml", "TOOLS", tools, "CACHE", "a",
                 "TEMP", "0"})
                .find("more than 1048576"),
            std::string::npos);
  EXPECT_EQ(gen({"EMBEDDER", "stories"}),
            "(error) ERR EMBEDDER needs CACHE: INFER.GENERATE embeds the prompt only to look it up in a cache");
  EXPECT_EQ(gen({"CACHE", "a", "EMBEDDER", "nope"}), "(error) ERR unknown EMBEDDER model 'nope' (see INFER.MODELS)");
  EXPECT_EQ(run({"PING"}), "PONG");
}

TEST_F(SemanticCacheTest, TheCacheKeyIsDeclared) {
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.GENERATE", "stories", "PROMPT", "x", "CACHE", "c1", "TTL", "5"}), "[c1]");
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.RAG", "stories", "kb", "QUERY", "x", "CACHE", "c2"}), "[kb, c2]");
  const std::string flags = run({"COMMAND", "GETKEYSANDFLAGS", "INFER.GENERATE", "stories", "PROMPT", "x", "CACHE", "c1"});
  EXPECT_NE(flags.find("RW"), std::string::npos) << flags;
  EXPECT_NE(flags.find("access"), std::string::npos) << flags;
  // ACL: a user who may only read the cache key cannot use it (a miss stores).
  run({"ACL", "SETUSER", "reader", "on", ">pw", "+@all", "%R~c*"});
  RedisConn c = server_->connect();
  ASSERT_EQ(show(command(c.get(), {"AUTH", "reader", "pw"}).get()), "OK");
  EXPECT_NE(show(command(c.get(), {"INFER.GENERATE", "stories", "PROMPT", "x", "TEMP", "0", "CACHE", "c1"}).get())
                .find("NOPERM"),
            std::string::npos);
  run({"ACL", "DELUSER", "reader"});
}

// GENERATE's EMBEDDER: a dedicated embedding model embeds the prompt (a chat as rendered) for the cache.
class SemanticCacheEmbedder : public SharedServerTest<SemanticCacheEmbedder> {
 public:
  static std::vector<std::string> module_args() {
    return {"MODEL", "stories", stories_model_path(), "MODEL-DIR", reference_dir() + "/models"};
  }
};

TEST_F(SemanticCacheEmbedder, TheEmbedderEmbedsThePrompt) {
  INFER_REQUIRE_DIR(reference_dir());
  if (run({"INFER.MODELS"}).find("bert") == std::string::npos) {
    ASSERT_EQ(run({"INFER.LOAD", "bert", "tiny-bert-f32.gguf"}), "OK");
  }
  run({"DEL", "cache:e"});
  for (const std::vector<std::string>& input :
       {std::vector<std::string>{"PROMPT", kPrompt}, {"CHAT", "user", kPrompt, "TEMPLATE", "chatml"}}) {
    const std::vector<std::string> request =
        cat(cat({"INFER.GENERATE", "stories"}, input), cat({"CACHE", "cache:e", "EMBEDDER", "bert", "WITHSTATS"}, kGreedy));
    const auto miss = fields(command(c_.get(), request).get());
    ASSERT_EQ(miss.count("error"), 0u) << miss.at("error");
    EXPECT_EQ(miss.at("cached"), "0");
    const auto hit = fields(command(c_.get(), request).get());
    EXPECT_EQ(hit.at("cached"), "1");
    EXPECT_EQ(hit.at("text"), miss.at("text"));
  }
  // The set holds bert's vectors: the model's own are another width.
  Reply info = command(c_.get(), {"INFER.INFO", "bert"});
  const auto bert = fields(info.get());
  EXPECT_EQ(run({"INFER.VDIM", "cache:e"}), bert.at("n_embd"));
  EXPECT_EQ(run({"INFER.VCARD", "cache:e"}), "2");
  if (bert.at("n_embd") != "64") {
    EXPECT_NE(run(cat({"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:e"}, kGreedy))
                  .find("CACHE: vector dimension mismatch"),
              std::string::npos);
  }
}

// A replica gets the master's entries (and answers from them), and an AOF reload keeps them.
TEST(SemanticCacheReplication, ReplicaAndAofReloadKeepTheCache) {
  INFER_REQUIRE_DIR(models_dir());
  const std::vector<std::string> model = {"MODEL", "stories", stories_model_path()};
  RedisServer master({.module_args = model, .server_args = {"--appendonly", "yes", "--enable-debug-command", "yes"}});
  RedisServer replica({.module_args = model, .server_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}});
  RedisConn m = master.connect(), r = replica.connect();
  ASSERT_TRUE(wait_until([&] { return info_value(r.get(), "replication", "master_link_status") == "up"; }));
  const std::vector<std::string> request =
      cat({"INFER.GENERATE", "stories", "PROMPT", kPrompt, "CACHE", "cache:r", "TTL", "3600", "WITHSTATS"}, kGreedy);
  const auto miss = fields(command(m.get(), request).get());
  ASSERT_EQ(miss.at("cached"), "0");
  ASSERT_TRUE(wait_until([&] { return show(command(r.get(), {"INFER.VCARD", "cache:r"}).get()) == "1"; }));
  const auto on_replica = fields(command(r.get(), request).get());
  EXPECT_EQ(on_replica.at("cached"), "1");
  EXPECT_EQ(on_replica.at("text"), miss.at("text"));

  ASSERT_EQ(show(command(m.get(), {"DEBUG", "LOADAOF"}).get()), "OK");
  EXPECT_EQ(show(command(m.get(), {"INFER.VCARD", "cache:r"}).get()), "1");
  const auto reloaded = fields(command(m.get(), request).get());
  EXPECT_EQ(reloaded.at("cached"), "1");
  EXPECT_EQ(reloaded.at("text"), miss.at("text"));
}

}  // namespace
}  // namespace infer::test
