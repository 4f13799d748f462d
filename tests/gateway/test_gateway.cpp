// `infer gateway` (src/gateway) in front of a real redis-server running the module with stories260K,
// driven over HTTP by cpp-httplib's client as an OpenAI client would: the response objects, SSE
// streams, error objects and statuses, Redis ACL users as bearer keys, and a client that leaves.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "gateway/gateway.h"
#include "redis/redis_cluster.h"
#include "redis/redis_server.h"
#include "support/chat_models.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

using nlohmann::json;

class GatewayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // stories260K, and the same weights with Qwen 2.5's chat template (it teaches tool calls).
    std::vector<std::string> args = {"MODEL", "stories", stories_model_path(), "THREADS", "1", "QUEUE", "2",
                                     "MAX-RUNNING", "1"};
    char dir[] = "/tmp/infer-gateway-XXXXXX";
    dir_ = mkdtemp(dir);
    const std::string qwen = shared_template("Qwen-Qwen2.5-7B-Instruct.jinja");
    if (std::filesystem::exists(stories_model_path()) && !qwen.empty()) {
      write_chat_model(stories_model_path(), dir_ + "/qwen.gguf", qwen);
      args.insert(args.end(), {"MODEL", "qwen", dir_ + "/qwen.gguf"});
    }
    server_ = new RedisServer({.module_args = args});
    gateway::GatewayOptions o;
    o.redis_port = server_->port();
    o.listen_port = 0;
    o.threads = 16;
    o.max_body_bytes = 64 << 10;
    o.access_log = false;
    gateway_ = new gateway::Gateway(o);
    port_ = gateway_->start();
  }
  static void TearDownTestSuite() {
    delete gateway_;
    delete server_;
    std::filesystem::remove_all(dir_);
  }
  void SetUp() override { INFER_REQUIRE_DIR(models_dir()); }

  httplib::Client client(const std::string& key = "") const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    if (!key.empty()) c.set_bearer_token_auth(key.c_str());
    return c;
  }
  // POSTs the body; returns the status and the parsed JSON (null when the body is not JSON).
  std::pair<int, json> post(const std::string& path, const json& body, const std::string& key = "") const {
    auto r = client(key).Post(path.c_str(), body.dump(), "application/json");
    if (!r) return {-1, nullptr};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  static json chat_body(int max_tokens, json extra = json::object()) {
    json b = {{"model", "stories"},
              {"chat_template", "chatml"},
              {"messages", {{{"role", "system"}, {"content", "You tell stories."}},
                            {{"role", "user"}, {"content", "Once upon a time"}}}},
              {"max_tokens", max_tokens},
              {"temperature", 0}};
    b.update(extra);
    return b;
  }
  // The `data:` payloads of an SSE body, in order.
  static std::vector<std::string> sse_events(const std::string& body) {
    std::vector<std::string> out;
    size_t at = 0;
    while ((at = body.find("data: ", at)) != std::string::npos) {
      const size_t end = body.find("\n\n", at);
      out.push_back(body.substr(at + 6, end - at - 6));
      at = end;
    }
    return out;
  }
  std::string run(const std::vector<std::string>& argv) const {
    RedisConn c = server_->connect();
    return show(command(c.get(), argv).get());
  }

  static inline RedisServer* server_ = nullptr;
  static inline gateway::Gateway* gateway_ = nullptr;
  static inline int port_ = 0;
  static inline std::string dir_;
};

TEST_F(GatewayTest, ModelsListsTheLoadedModels) {
  auto r = client().Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  std::set<std::string> ids;
  for (const json& m : j["data"]) {
    ids.insert(m["id"].get<std::string>());
    EXPECT_EQ(m["object"], "model");
  }
  EXPECT_EQ(ids.count("stories"), 1u);
  EXPECT_EQ(ids.size(), static_cast<size_t>(std::stoi(run({"EVAL", "return #redis.call('INFER.MODELS')", "0"}))));
  auto one = client().Get("/v1/models/stories");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);
  auto none = client().Get("/v1/models/nope");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);
  EXPECT_EQ(json::parse(none->body)["error"]["code"], "model_not_found");
}

TEST_F(GatewayTest, ChatCompletionIsTheModulesGenerationOfTheSameMessages) {
  auto [status, j] = post("/v1/chat/completions", chat_body(12));
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "stories");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 5);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + 12);
  // The same conversation through the module directly gives the same text.
  const std::string direct = run({"INFER.GENERATE", "stories", "TEMPLATE", "chatml", "MESSAGES",
                                  chat_body(12)["messages"].dump(), "MAXTOKENS", "12", "TEMP", "0"});
  EXPECT_EQ(choice["message"]["content"], direct);
}

TEST_F(GatewayTest, StreamedChatEndsWithFinishUsageAndDone) {
  auto r = client().Post("/v1/chat/completions",
                         chat_body(20, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}).dump(),
                         "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto events = sse_events(r->body);
  ASSERT_GE(events.size(), 4u) << r->body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::optional<std::string> finish;
  json usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    if (c.contains("usage") && !c["usage"].is_null()) {
      usage = c["usage"];
      EXPECT_TRUE(c["choices"].empty());
      continue;
    }
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage["completion_tokens"], 20);
  auto [status, plain] = post("/v1/chat/completions", chat_body(20));
  ASSERT_EQ(status, 200);
  EXPECT_EQ(text, plain["choices"][0]["message"]["content"]);
}

TEST_F(GatewayTest, JsonSchemaResponseFormatGivesValidJson) {
  const json schema = {{"type", "object"},
                       {"properties", {{"name", {{"type", "string"}, {"maxLength", 8}}}, {"age", {{"type", "integer"}}}}},
                       {"required", {"name", "age"}},
                       {"additionalProperties", false}};
  auto [status, j] = post("/v1/chat/completions",
                          chat_body(60, {{"temperature", 1}, {"seed", 3},
                                         {"response_format", {{"type", "json_schema"},
                                                              {"json_schema", {{"name", "person"}, {"schema", schema}}}}}}));
  ASSERT_EQ(status, 200) << j.dump();
  const json out = json::parse(j["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_TRUE(out["name"].is_string());
  EXPECT_TRUE(out["age"].is_number_integer());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(GatewayTest, RequiredToolChoiceGivesAToolCall) {
  const json tools = json::array({{{"type", "function"},
                                   {"function", {{"name", "get_weather"},
                                                 {"parameters", {{"type", "object"},
                                                                 {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                                                                 {"required", {"city"}},
                                                                 {"additionalProperties", false}}}}}}});
  INFER_REQUIRE_DIR(chat_templates_root());
  for (bool stream : {false, true}) {
    json body = chat_body(120, {{"model", "qwen"}, {"tools", tools}, {"tool_choice", "required"}, {"stream", stream}});
    body.erase("chat_template");
    auto r = client().Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json call;
    std::string finish;
    if (stream) {
      for (const auto& e : sse_events(r->body)) {
        if (e == "[DONE]") continue;
        const json c = json::parse(e);
        ASSERT_FALSE(c["choices"].empty()) << e;
        const json& d = c["choices"][0]["delta"];
        if (d.contains("tool_calls")) call = d["tool_calls"][0];
        if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
      }
      EXPECT_EQ(call["index"], 0);
    } else {
      const json j = json::parse(r->body);
      ASSERT_TRUE(j["choices"][0]["message"].contains("tool_calls")) << r->body;
      call = j["choices"][0]["message"]["tool_calls"][0];
      finish = j["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(finish, "tool_calls") << r->body;
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_TRUE(json::parse(call["function"]["arguments"].get<std::string>())["city"].is_string());
    EXPECT_FALSE(call["id"].get<std::string>().empty());
  }
}

TEST_F(GatewayTest, LogprobsAreOpenAisShape) {
  auto [status, j] = post("/v1/chat/completions", chat_body(5, {{"logprobs", true}, {"top_logprobs", 2}}));
  ASSERT_EQ(status, 200) << j.dump();
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u);
  std::string joined;
  for (const json& t : content) {
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    ASSERT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
    EXPECT_EQ(t["bytes"].size(), t["token"].get<std::string>().size());
    joined += t["token"].get<std::string>();
  }
  EXPECT_EQ(joined, j["choices"][0]["message"]["content"]);
}

TEST_F(GatewayTest, CompletionsAndEmbeddings) {
  auto [status, j] = post("/v1/completions", {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 8},
                                              {"temperature", 0}});
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"],
            run({"INFER.GENERATE", "stories", "PROMPT", "Once upon a time", "MAXTOKENS", "8", "TEMP", "0"}));
  auto [s2, f] = post("/v1/embeddings", {{"model", "stories"}, {"input", json::array({"hello", "a little girl"})}});
  ASSERT_EQ(s2, 200) << f.dump();
  ASSERT_EQ(f["data"].size(), 2u);
  const size_t dim = f["data"][0]["embedding"].size();
  EXPECT_GT(dim, 8u);
  auto [s3, b] = post("/v1/embeddings", {{"model", "stories"}, {"input", "hello"}, {"encoding_format", "base64"}});
  ASSERT_EQ(s3, 200);
  // base64 of dim float32s: 4·dim bytes.
  EXPECT_EQ(b["data"][0]["embedding"].get<std::string>().size(), (4 * dim + 2) / 3 * 4);
  EXPECT_GT(f["usage"]["prompt_tokens"].get<int>(), 1);
}

TEST_F(GatewayTest, BadRequestsGetOpenAisErrorObject) {
  auto expect_error = [&](const std::string& path, const std::string& body, int status, const std::string& param) {
    auto r = client().Post(path.c_str(), body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << body << " -> " << r->body;
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r->body;
    }
  };
  expect_error("/v1/chat/completions", "{not json", 400, "");
  expect_error("/v1/chat/completions", "[1,2]", 400, "");
  expect_error("/v1/chat/completions", chat_body(4, {{"n", 2}}).dump(), 400, "n");
  expect_error("/v1/chat/completions", chat_body(4, {{"model", "nope"}}).dump(), 404, "model");
  expect_error("/v1/chat/completions", chat_body(4, {{"messages", json::array()}}).dump(), 400, "messages");
  expect_error("/v1/chat/completions", chat_body(4, {{"top_logprobs", 50}, {"logprobs", true}}).dump(), 400, "top_logprobs");
  expect_error("/v1/chat/completions", chat_body(4, {{"tool_choice", "required"}}).dump(), 400, "tool_choice");
  expect_error("/v1/chat/completions", chat_body(4, {{"response_format", {{"type", "yaml"}}}}).dump(), 400,
               "response_format");
  // The module's own refusal, with its message.
  expect_error("/v1/chat/completions", chat_body(4, {{"temperature", 0}, {"top_p", 7}}).dump(), 400, "");
  expect_error("/v1/embeddings", json({{"model", "stories"}, {"input", json::array({1, 2})}}).dump(), 400, "input");
  expect_error("/v1/nothing", "{}", 404, "");
  expect_error("/v1/chat/completions", std::string(70 << 10, ' '), 413, "");
}

TEST_F(GatewayTest, BearerKeysAreRedisUsers) {
  ASSERT_EQ(run({"ACL", "SETUSER", "reader", "on", ">s3cret", "+infer.models", "+infer.generate", "+xread", "+expire",
                 "+auth", "+reset", "~*"}),
            "OK");
  auto ok = client("reader:s3cret").Get("/v1/models");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto wrong = client("reader:nope").Get("/v1/models");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401) << wrong->body;
  EXPECT_EQ(json::parse(wrong->body)["error"]["code"], "invalid_api_key");
  // The ACL decides: no embeddings for this user.
  auto [status, j] = post("/v1/embeddings", {{"model", "stories"}, {"input", "hi"}}, "reader:s3cret");
  EXPECT_EQ(status, 403) << j.dump();
  // A pooled connection that served a user is the default user's again for the next request.
  auto [s2, e] = post("/v1/embeddings", {{"model", "stories"}, {"input", "hi"}});
  EXPECT_EQ(s2, 200) << e.dump();
}

TEST_F(GatewayTest, BusyModuleIs429WithRetryAfter) {
  // MAX-RUNNING 1 and QUEUE 2: of eight long requests at once, some are refused with BUSY.
  std::atomic<int> busy{0}, ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto r = client().Post("/v1/completions",
                             json({{"model", "stories"}, {"prompt", "Once"}, {"max_tokens", 200}}).dump(), "application/json");
      if (r && r->status == 429 && r->get_header_value("Retry-After") == "1") ++busy;
      if (r && r->status == 200) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(busy.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(busy + ok, 8);
}

TEST_F(GatewayTest, AClientThatLeavesCancelsItsGeneration) {
  // Read the first chunk of a long stream, then drop the connection: the stream ends `finish cancelled`.
  httplib::Client c = client();
  std::string stream_key;
  std::string received;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = json({{"model", "stories"}, {"prompt", "Once"}, {"max_tokens", 1500}, {"stream", true}}).dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    received.append(data, n);
    return received.find("data: ") == std::string::npos;  // stop after the first event
  };
  httplib::Response res;
  httplib::Error error;
  EXPECT_FALSE(c.send(req, res, error));  // cancelled by the receiver
  c.stop();
  stream_key = res.get_header_value("X-Infer-Stream");
  ASSERT_EQ(stream_key.rfind("infer:gw:", 0), 0u) << stream_key;
  ASSERT_TRUE(wait_until(
      [&] { return run({"XREVRANGE", stream_key, "+", "-", "COUNT", "1"}).find("finish") != std::string::npos; }));
  const std::string last = run({"XREVRANGE", stream_key, "+", "-", "COUNT", "1"});
  EXPECT_NE(last.find("cancelled"), std::string::npos) << last;
  EXPECT_GT(std::stoll(run({"TTL", stream_key})), 0);
}

TEST_F(GatewayTest, CacheHeaderAnswersARepeatFromTheSemanticCache) {
  httplib::Headers cache = {{"X-Infer-Cache", "gw:cache; threshold=0.99; ttl=600"}};
  const std::string body = chat_body(16).dump();
  auto miss = client().Post("/v1/chat/completions", cache, body, "application/json");
  ASSERT_TRUE(miss);
  ASSERT_EQ(miss->status, 200) << miss->body;
  EXPECT_EQ(miss->get_header_value("X-Infer-Cache"), "miss");
  auto hit = client().Post("/v1/chat/completions", cache, body, "application/json");
  ASSERT_TRUE(hit);
  ASSERT_EQ(hit->status, 200) << hit->body;
  EXPECT_EQ(hit->get_header_value("X-Infer-Cache").rfind("hit; similarity=", 0), 0u) << hit->get_header_value("X-Infer-Cache");
  EXPECT_EQ(json::parse(hit->body)["choices"][0]["message"]["content"],
            json::parse(miss->body)["choices"][0]["message"]["content"]);
  EXPECT_EQ(run({"INFER.VCARD", "gw:cache"}), "1");
  auto bad = client().Post("/v1/chat/completions", {{"X-Infer-Cache", "gw:cache; colour=blue"}}, body,
                           "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["code"], "invalid_cache_header");
}

TEST_F(GatewayTest, OfficialOpenAiSdk) {
  // tests/gateway/openai_sdk: the `openai` npm package as pinned there, installed by scripts/test.sh
  // (`npm ci`), unmodified, run with node's test runner against this suite's gateway.
  const std::string dir = INFER_OPENAI_SDK_DIR;
  if (!std::filesystem::exists(dir + "/node_modules/openai/package.json"))
    GTEST_SKIP() << "the openai package is not installed: cd " << dir << " && npm ci";
  INFER_REQUIRE_DIR(chat_templates_root());
  const std::string cmd = "cd " + dir + " && GATEWAY_URL=http://127.0.0.1:" + std::to_string(port_) +
                          "/v1 node --test --test-reporter=spec openai_sdk.test.mjs 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("pass 9\n"), std::string::npos) << out;  // the spec reporter's summary
  EXPECT_NE(out.find("fail 0\n"), std::string::npos) << out;
}

TEST_F(GatewayTest, UnreachableRedisIs503) {
  gateway::GatewayOptions o;
  o.redis_port = 1;  // nothing listens there
  o.listen_port = 0;
  o.access_log = false;
  gateway::Gateway gw(o);
  httplib::Client c("127.0.0.1", gw.start());
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "redis_unavailable");
}

TEST(GatewayClusterTest, RequestsSpreadOverThePrimariesAndStreamsStayOnTheirNode) {
  INFER_REQUIRE_DIR(models_dir());
  if (const std::string why = RedisCluster::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  RedisCluster cluster({.masters = 3, .replicas_per_master = 0,
                        .module_args = {"MODEL", "stories", stories_model_path(), "THREADS", "1"}});
  gateway::GatewayOptions o;
  o.redis_port = cluster.port(0);
  o.cluster = true;
  o.listen_port = 0;
  o.access_log = false;
  gateway::Gateway gw(o);
  httplib::Client c("127.0.0.1", gw.start());
  c.set_read_timeout(60, 0);
  const json body = {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}};
  std::string first;
  for (int i = 0; i < 6; ++i) {
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string text = json::parse(r->body)["choices"][0]["text"];
    if (i == 0) first = text;
    EXPECT_EQ(text, first);  // every node runs the same model
  }
  for (int i = 0; i < 3; ++i) {
    json streamed = body;
    streamed["stream"] = true;
    auto r = c.Post("/v1/completions", streamed.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos) << r->body;
    // The stream key's tag puts it on a node that owns its slot: it exists there, with its finish.
    const std::string key = r->get_header_value("X-Infer-Stream");
    RedisConn owner = cluster.connect_owner(cluster.key_slot(key));
    EXPECT_NE(show(command(owner.get(), {"XREVRANGE", key, "+", "-", "COUNT", "1"}).get()).find("finish"),
              std::string::npos);
  }
  // A request with a semantic cache goes to the cache key's owner; after its slot moves, the gateway
  // follows the redirection and the moved cache answers.
  const httplib::Headers cache = {{"X-Infer-Cache", "gw:c"}};
  auto miss = c.Post("/v1/completions", cache, body.dump(), "application/json");
  ASSERT_TRUE(miss);
  ASSERT_EQ(miss->status, 200) << miss->body;
  EXPECT_EQ(miss->get_header_value("X-Infer-Cache"), "miss");
  const int slot = cluster.key_slot("gw:c");
  cluster.migrate_slot(slot, cluster.node_for_slot(slot), cluster.master_not_owning(slot));
  auto hit = c.Post("/v1/completions", cache, body.dump(), "application/json");
  ASSERT_TRUE(hit);
  ASSERT_EQ(hit->status, 200) << hit->body;
  EXPECT_EQ(hit->get_header_value("X-Infer-Cache").rfind("hit", 0), 0u) << hit->get_header_value("X-Infer-Cache");
  int nodes_used = 0;
  for (size_t m : cluster.masters()) {
    RedisConn conn = cluster.connect(m);
    if (info_number(conn.get(), "infer", "infer_completed") > 0) ++nodes_used;
  }
  EXPECT_EQ(nodes_used, 3);
}

}  // namespace
}  // namespace infer::test
