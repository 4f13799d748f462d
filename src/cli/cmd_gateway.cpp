// `infer gateway`: serves OpenAI's HTTP API in front of a Redis node running the module until SIGINT or
// SIGTERM (docs/gateway.md).
#include <csignal>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <thread>

#include "cli/command_registry.h"
#include "gateway/gateway.h"

namespace infer::cli {
namespace {

struct GatewayArgs {
  std::string redis = "127.0.0.1:6379";
  std::string listen = "127.0.0.1:8080";
  gateway::GatewayOptions options;
};

// "host:port" (the last colon splits, so "[::1]:6379" style hosts keep theirs).
std::pair<std::string, int> host_port(const std::string& flag, const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    throw std::invalid_argument(flag + " " + s + ": expected HOST:PORT");
  std::string host = s.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const int port = std::stoi(s.substr(colon + 1));
  if (port < 0 || port > 65535) throw std::invalid_argument(flag + " " + s + ": port out of range");
  return {host, port};
}

void run_gateway(GatewayArgs a) {
  std::tie(a.options.redis_host, a.options.redis_port) = host_port("--redis", a.redis);
  std::tie(a.options.listen_host, a.options.listen_port) = host_port("--listen", a.listen);
  // Signals are taken by a waiting thread (sigwait), which stops the server cleanly.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that leaves mid-stream is a failed write, not a signal
  gateway::Gateway gw(a.options);
  const int port = gw.start();
  std::fprintf(stderr, "gateway: listening on %s:%d, Redis%s at %s:%d, %d threads\n", a.options.listen_host.c_str(),
               port, a.options.cluster ? " Cluster" : "", a.options.redis_host.c_str(), a.options.redis_port,
               a.options.threads);
  int sig = 0;
  sigwait(&set, &sig);
  std::fprintf(stderr, "gateway: signal %d, stopping\n", sig);
  gw.stop();
}

void setup_gateway(CLI::App& app) {
  auto args = std::make_shared<GatewayArgs>();
  auto* cmd = app.add_subcommand("gateway", "Serve OpenAI's HTTP API (chat, completions, embeddings, models) in front of Redis");
  cmd->add_option("--redis", args->redis, "HOST:PORT of the Redis node running the module")->capture_default_str();
  cmd->add_flag("--cluster", args->options.cluster,
                "--redis is a node of a Redis Cluster: spread requests over its primaries (CLUSTER SLOTS)");
  cmd->add_option("--listen", args->listen, "HOST:PORT to serve HTTP on (port 0: any free port)")->capture_default_str();
  cmd->add_option("--threads", args->options.threads, "requests served at once (a streamed request holds one)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", args->options.max_body_bytes, "largest request body accepted (413 past it)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--stream-ttl", args->options.stream_ttl_s,
                  "seconds a streamed request's Redis Stream (infer:gw:<id>) is kept after it ends")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--retry-after", args->options.retry_after_s, "Retry-After seconds sent with 429 (the module's BUSY)")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  cmd->add_flag("!--no-access-log", args->options.access_log, "do not log one line per request on stderr");
  cmd->callback([args] { run_gateway(*args); });
}

RegisterCommand reg_gateway("gateway", setup_gateway);

}  // namespace
}  // namespace infer::cli
