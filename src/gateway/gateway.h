// `infer gateway`: OpenAI's HTTP API (GET /v1/models, POST /v1/chat/completions, /v1/completions,
// /v1/embeddings) in front of a Redis node that runs the module. Stateless: every request becomes
// INFER.* commands on a pooled connection, authenticated as the request's bearer key says, so Redis's
// ACL decides what each caller may do (docs/gateway.md).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace infer::gateway {

struct GatewayOptions {
  std::string redis_host = "127.0.0.1";
  int redis_port = 6379;
  bool cluster = false;                // a Redis Cluster: spread requests over its primaries (router.h)
  std::string listen_host = "127.0.0.1";
  int listen_port = 8080;              // 0: a free port (start() returns it)
  int threads = 128;                   // requests served at once (a streamed one holds its thread)
  size_t max_body_bytes = size_t{8} << 20;
  int stream_ttl_s = 60;               // a streamed request's Redis Stream is kept this long after it ends
  int retry_after_s = 1;               // Retry-After on 429
  bool access_log = true;              // one line per request on stderr
};

class Gateway {
 public:
  explicit Gateway(GatewayOptions options);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Binds and serves on a background thread; returns the port. Throws std::runtime_error when it
  // cannot listen.
  int start();
  // Binds and serves on the calling thread until stop() (from another thread or a signal handler's
  // helper thread). Throws std::runtime_error when it cannot listen.
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace infer::gateway
