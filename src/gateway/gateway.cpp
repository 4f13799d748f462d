#include "gateway/gateway.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "gateway/openai.h"
#include "gateway/redis_client.h"
#include "gateway/router.h"

namespace infer::gateway {

namespace {

using Clock = std::chrono::steady_clock;

long long unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string random_hex(size_t n) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += kHex[rng() & 15];
  return s;
}

json parse_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw ApiError(400, "the request body is not valid JSON", "", "invalid_json");
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_json");
  return body;
}

// A pooled connection for one request, authenticated as its bearer key says: "user:password" is
// AUTH user password, a bare key AUTH password (the default user); no key, the default user.
class Session {
 public:
  Session(RedisPool& pool, const httplib::Request& req) : pool_(pool), conn_(pool.take()) {
    const std::string header = req.get_header_value("Authorization");
    if (header.rfind("Bearer ", 0) != 0) return;
    const std::string key = header.substr(7);
    if (key.empty()) return;
    const size_t colon = key.find(':');
    Reply r = colon == std::string::npos ? conn_->command({"AUTH", key})
                                         : conn_->command({"AUTH", key.substr(0, colon), key.substr(colon + 1)});
    authenticated_ = true;
    if (r->type != REDIS_REPLY_ERROR) return;
    // SDKs always send a key: with no password set, a bare one means the default user.
    const std::string error = reply_text(r.get());
    if (colon == std::string::npos && error.find("without any password configured") != std::string::npos) return;
    throw module_error(error);
  }
  ~Session() { pool_.give_back(std::move(conn_), authenticated_); }
  RedisConnection& conn() { return *conn_; }

 private:
  RedisPool& pool_;
  std::unique_ptr<RedisConnection> conn_;
  bool authenticated_ = false;
};


struct StreamEntry {
  std::string id;
  std::vector<std::pair<std::string, std::string>> fields;
  const std::string* get(const char* name) const {
    for (const auto& [k, v] : fields)
      if (k == name) return &v;
    return nullptr;
  }
};

// XREAD's reply for one stream: its entries (none on a timeout).
std::vector<StreamEntry> stream_entries(const redisReply* r) {
  std::vector<StreamEntry> out;
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0) return out;
  const redisReply* stream = r->element[0];
  if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2) return out;
  const redisReply* entries = stream->element[1];
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* e = entries->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) continue;
    StreamEntry se{reply_text(e->element[0]), {}};
    const redisReply* kv = e->element[1];
    for (size_t k = 0; k + 1 < kv->elements; k += 2)
      se.fields.emplace_back(reply_text(kv->element[k]), reply_text(kv->element[k + 1]));
    out.push_back(std::move(se));
  }
  return out;
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

struct Gateway::Impl {
  explicit Impl(GatewayOptions o)
      : options(std::move(o)), router(options.redis_host, options.redis_port, options.cluster) {}

  GatewayOptions options;
  Router router;
  httplib::Server server;
  std::thread thread;

  void log(const httplib::Request& req, int status, const std::string& model, long long tokens, Clock::time_point t0) const {
    if (!options.access_log) return;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::fprintf(stderr, "gateway: %s %s %d model=%s tokens=%lld %.1f ms\n", req.method.c_str(), req.path.c_str(),
                 status, model.empty() ? "-" : model.c_str(), tokens, ms);
  }

  // The reply, or what its error means for the client (a moved slot re-reads the cluster's map first).
  Reply checked(Reply r) {
    if (r->type != REDIS_REPLY_ERROR) return r;
    const std::string error = reply_text(r.get());
    if (is_redirection(error)) {
      router.refresh();
      throw ApiError(503, "the cluster is moving slots (" + error + "): retry", "", "cluster_changing", "api_error");
    }
    throw module_error(error);
  }

  void reply_error(httplib::Response& res, const ApiError& e) const {
    res.status = e.status;
    if (e.status == 429 || e.status == 503) res.set_header("Retry-After", std::to_string(options.retry_after_s));
    res.set_content(dump(error_body(e)), "application/json");
  }

  // Runs `fn`, turning what it throws into OpenAI's error object, and logs the request.
  template <class Fn>
  void serve(const httplib::Request& req, httplib::Response& res, Fn fn) {
    const auto t0 = Clock::now();
    std::string model;
    long long tokens = 0;
    try {
      fn(model, tokens);
    } catch (const ApiError& e) {
      reply_error(res, e);
    } catch (const RedisUnavailable& e) {
      reply_error(res, ApiError(503, e.what(), "", "redis_unavailable", "api_error"));
    } catch (const std::exception& e) {
      reply_error(res, ApiError(500, e.what(), "", "internal_error", "api_error"));
    }
    if (res.status == -1) res.status = 200;  // httplib's default, set after the handler
    log(req, res.status, model, tokens, t0);
  }

  void models(const httplib::Request& req, httplib::Response& res) {
    serve(req, res, [&](std::string&, long long&) {
      Session s(*router.pick().pool, req);
      Reply r = checked(s.conn().command({"INFER.MODELS"}));
      json data = json::array();
      for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i)
        data.push_back({{"id", reply_text(r->element[i])}, {"object", "model"}, {"created", 0}, {"owned_by", "redis-infer"}});
      res.set_content(dump({{"object", "list"}, {"data", data}}), "application/json");
    });
  }

  void model(const httplib::Request& req, httplib::Response& res) {
    serve(req, res, [&](std::string& model, long long&) {
      model = req.matches[1];
      Session s(*router.pick().pool, req);
      Reply r = checked(s.conn().command({"INFER.INFO", model}));
      res.set_content(dump({{"id", model}, {"object", "model"}, {"created", 0}, {"owned_by", "redis-infer"}}),
                      "application/json");
    });
  }

  void embeddings(const httplib::Request& req, httplib::Response& res) {
    serve(req, res, [&](std::string& model, long long& tokens) {
      const EmbeddingCall call = embedding_call(parse_body(req));
      model = call.model;
      Session s(*router.pick().pool, req);
      json data = json::array();
      for (size_t i = 0; i < call.inputs.size(); ++i) {
        Reply count = checked(s.conn().command({"INFER.TOKENIZE", call.model, call.inputs[i]}));
        tokens += count->type == REDIS_REPLY_ARRAY ? static_cast<long long>(count->elements) : 0;
        Reply blob = checked(s.conn().command({"INFER.EMBED", call.model, call.inputs[i]}));
        data.push_back(embedding_object(i, reply_text(blob.get()), call.base64));
      }
      res.set_content(dump({{"object", "list"}, {"data", data}, {"model", call.model},
                            {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}),
                      "application/json");
    });
  }

  void generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    serve(req, res, [&](std::string& model, long long& tokens) {
      const json body = parse_body(req);
      GenerationCall call = chat ? chat_call(body) : completion_call(body);
      model = call.model;
      const std::vector<std::string> cache = cache_arguments(req.get_header_value("X-Infer-Cache"));
      call.argv.insert(call.argv.end() - 1, cache.begin(), cache.end());  // before WITHSTATS
      Router::Target node = cache.empty() ? router.pick() : router.owner(cache[1]);
      const std::string id = (chat ? "chatcmpl-" : "cmpl-") + random_hex(24);
      if (call.stream) return stream(req, res, std::move(call), chat, id, node);
      Reply r;
      {
        Session s(*node.pool, req);
        r = s.conn().command(call.argv);
      }
      // A cache key whose slot moved: follow the redirection once, to the owner in the new map.
      if (!cache.empty() && r->type == REDIS_REPLY_ERROR && is_redirection(reply_text(r.get()))) {
        router.refresh(true);
        node = router.owner(cache[1]);
        Session s(*node.pool, req);
        r = s.conn().command(call.argv);
      }
      r = checked(std::move(r));
      const Generation g = parse_generation(r.get());
      tokens = g.completion_tokens;
      if (g.cached)
        res.set_header("X-Infer-Cache", *g.cached ? "hit; similarity=" + std::to_string(g.cache_similarity) : "miss");
      const json out = chat ? chat_completion(id, call.model, unix_now(), g) : text_completion(id, call.model, unix_now(), g);
      res.set_content(dump(out), "application/json");
    });
  }

  // One streamed generation: INFER.GENERATE ... STREAM key on one connection (its own thread: it
  // replies when the generation ends), XREAD BLOCK on another, each entry forwarded as an SSE chunk.
  struct StreamJob {
    // Both connections go to one node; the key's tag names a slot that node owns.
    StreamJob(Impl& gw, const httplib::Request& req, GenerationCall c, bool chat, std::string id, Router::Target node)
        : gw(gw), call(std::move(c)), chat(chat), id(std::move(id)), key("infer:gw:" + node.tag + random_hex(24)),
          created(unix_now()), generator(*node.pool, req), reader(*node.pool, req) {}
    ~StreamJob() {
      if (worker.joinable()) {
        if (!done) generator.conn().abort();  // the HTTP client left: Redis cancels the generation
        worker.join();
      }
      try {
        if (!reader.conn().broken()) reader.conn().command({"EXPIRE", key, std::to_string(gw.options.stream_ttl_s)});
      } catch (const RedisUnavailable&) {
      }
    }
    void start() {
      std::vector<std::string> argv = call.argv;
      argv.insert(argv.end(), {"STREAM", key});
      worker = std::thread([this, argv] {
        try {
          reply = generator.conn().command(argv);
        } catch (const RedisUnavailable& e) {
          failure = e.what();
        }
        done = true;
      });
    }
    std::vector<StreamEntry> read(int block_ms) {
      Reply r = gw.checked(
          reader.conn().command({"XREAD", "COUNT", "64", "BLOCK", std::to_string(block_ms), "STREAMS", key, last_id}));
      auto entries = stream_entries(r.get());
      if (!entries.empty()) last_id = entries.back().id;
      return entries;
    }

    Impl& gw;
    GenerationCall call;
    bool chat;
    std::string id, key;
    long long created;
    Session generator, reader;
    std::thread worker;
    std::atomic<bool> done{false};
    Reply reply;
    std::string failure;
    std::string last_id = "0-0";
    std::vector<StreamEntry> first;  // read before the response started
  };

  void stream(const httplib::Request& req, httplib::Response& res, GenerationCall call, bool chat, const std::string& id,
              Router::Target node) {
    auto job = std::make_shared<StreamJob>(*this, req, std::move(call), chat, id, node);
    job->start();
    // Wait for the first entry or the command's reply, so that a refused request is an HTTP error.
    while (job->first.empty()) {
      job->first = job->read(100);
      if (!job->first.empty() || !job->done) continue;
      job->worker.join();
      if (!job->failure.empty()) throw RedisUnavailable(job->failure);
      if (job->reply && job->reply->type == REDIS_REPLY_ERROR) checked(std::move(job->reply));
      job->first = job->read(1000);  // the reply came first: the entries are on their way
      if (job->first.empty()) throw ApiError(502, "the generation ended without stream entries", "", "bad_gateway", "api_error");
    }
    res.set_header("X-Infer-Stream", job->key);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [this, job](size_t, httplib::DataSink& sink) {
      return write_stream(*job, sink);
    });
  }

  bool write_stream(StreamJob& job, httplib::DataSink& sink) {
    const auto t0 = Clock::now();
    const std::string& model = job.call.model;
    auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    auto chunk = [&](const json& delta, const std::optional<std::string>& finish, const json& logprobs = nullptr) {
      return job.chat ? chat_chunk(job.id, model, job.created, delta, finish, logprobs)
                      : text_chunk(job.id, model, job.created, delta.value("content", ""), finish);
    };
    if (job.chat && !send(sse(chunk({{"role", "assistant"}, {"content", ""}}, std::nullopt)))) return false;
    std::string finish;
    std::vector<StreamEntry> entries = std::move(job.first);
    auto idle_since = Clock::now();
    while (finish.empty()) {
      for (const StreamEntry& e : entries) {
        if (const std::string* f = e.get("finish")) {
          finish = *f;
          break;
        }
        const std::string* text = e.get("text");
        if (!text || job.call.may_call_tools) continue;  // calls are sent whole at the end
        const std::string* lp = e.get("logprobs");
        json logprobs = lp && job.call.logprobs ? stream_logprobs(*lp) : json(nullptr);
        if (text->empty() && logprobs.is_null()) continue;
        if (!send(sse(chunk({{"content", *text}}, std::nullopt, logprobs)))) return false;
        idle_since = Clock::now();
      }
      if (!finish.empty()) break;
      entries = job.read(250);
      if (entries.empty() && Clock::now() - idle_since > std::chrono::seconds(1)) {
        // An SSE comment: clients ignore it, and a write to a client that left fails here.
        if (!send(": keep-alive\n\n")) return false;
        idle_since = Clock::now();
      }
    }
    job.worker.join();
    Generation g;
    if (job.reply && job.reply->type == REDIS_REPLY_ARRAY) g = parse_generation(job.reply.get());
    g.finish = finish;
    if (job.chat && job.call.may_call_tools) {
      if (!g.text.empty() && !send(sse(chunk({{"content", g.text}}, std::nullopt)))) return false;
      if (!g.tool_calls.empty()) {
        json calls = json::array();
        for (size_t i = 0; i < g.tool_calls.size(); ++i) {
          json c = g.tool_calls[i];
          c["index"] = i;
          calls.push_back(std::move(c));
        }
        if (!send(sse(chunk({{"tool_calls", calls}}, std::nullopt)))) return false;
      }
    } else if (!job.chat && job.call.may_call_tools) {
      if (!send(sse(chunk({{"content", g.text}}, std::nullopt)))) return false;
    }
    if (!send(sse(chunk(json::object(), finish_reason(finish))))) return false;
    if (job.call.include_usage) {
      const json u = usage(g.prompt_tokens, g.completion_tokens);
      const json c = job.chat ? chat_chunk(job.id, model, job.created, nullptr, std::nullopt, nullptr, u)
                              : text_chunk(job.id, model, job.created, "", std::nullopt, u);
      if (!send(sse(c))) return false;
    }
    if (!send("data: [DONE]\n\n")) return false;
    sink.done();
    if (options.access_log) {
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      std::fprintf(stderr, "gateway: stream %s finish=%s tokens=%lld %.1f ms\n", job.id.c_str(), finish.c_str(),
                   g.completion_tokens, ms);
    }
    return true;
  }

  void routes() {
    server.Get("/v1/models", [this](const httplib::Request& q, httplib::Response& r) { models(q, r); });
    server.Get(R"(/v1/models/(.+))", [this](const httplib::Request& q, httplib::Response& r) { model(q, r); });
    server.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { generate(q, r, true); });
    server.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { generate(q, r, false); });
    server.Post("/v1/embeddings", [this](const httplib::Request& q, httplib::Response& r) { embeddings(q, r); });
    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const int status = res.status;
      const std::string what = status == 404   ? "no route " + req.method + " " + req.path
                               : status == 413 ? "the request body is larger than " +
                                                     std::to_string(options.max_body_bytes) + " bytes"
                                               : "request refused";
      reply_error(res, ApiError(status, what, "", status == 404 ? "not_found" : ""));
    });
    server.set_payload_max_length(options.max_body_bytes);
    // Headers and body go out in separate writes: without TCP_NODELAY the body waits for the client's
    // delayed ACK (~40 ms a request; scripts/gateway_bench.sh).
    server.set_tcp_nodelay(true);
    const int threads = options.threads;
    server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  }

  int bind() {
    routes();
    if (options.listen_port == 0) {
      const int port = server.bind_to_any_port(options.listen_host);
      if (port < 0) throw std::runtime_error("gateway: cannot listen on " + options.listen_host);
      return port;
    }
    if (!server.bind_to_port(options.listen_host, options.listen_port))
      throw std::runtime_error("gateway: cannot listen on " + options.listen_host + ":" + std::to_string(options.listen_port));
    return options.listen_port;
  }
};

Gateway::Gateway(GatewayOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Gateway::~Gateway() { stop(); }

int Gateway::start() {
  const int port = impl_->bind();
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  while (!impl_->server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void Gateway::run() {
  impl_->bind();
  impl_->server.listen_after_bind();
}

void Gateway::stop() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace infer::gateway
