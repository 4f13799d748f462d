// Test helper: a real redis-server with the redis_infer module on a free loopback port, plus small
// clients (hiredis for RESP2, a raw-socket reader for RESP3, since hiredis 0.14 cannot parse RESP3).
// Reusable by any layer's tests (link infer_redis_test_support).
//
// The server is started in the constructor (waits for PING with a timeout; throws with the server log
// on failure) and stopped in the destructor (SIGTERM, then SIGKILL after a timeout). Each server gets
// its own temporary directory for its log and data files.
#pragma once
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/data_dirs.h"

namespace infer::test {

// Sanitizer builds (the module runs under the sanitizer's runtime in the server, see CMakeLists.txt)
// are several times slower and grow the server's RSS with shadow memory and ASan's quarantine: tests
// widen their latency bounds and skip their RSS bounds there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif

struct RedisServerOptions {
  std::vector<std::string> module_args;  // after the .so path on --loadmodule
  std::vector<std::string> server_args;  // extra redis-server arguments, e.g. {"--maxmemory", "1mb"}
  std::string module_path;               // default: redis_module_path()
  std::string config_file;               // given first, so that CONFIG REWRITE writes it (default: none)
  bool load_module = true;
  int start_timeout_ms = 10000;
  bool seccomp_like_systemd = false;     // run under seccomp_exec (setpriority kills the server)
  // A start meant to fail (a damaged data file): the constructor waits up to start_timeout_ms for the
  // server to exit, keeps its wait status (exit_status()) and log, and throws only if it keeps running.
  bool expect_exit = false;
};

// $INFER_BUILD_DIR/src/redis/redis_infer.so, else the path compiled in.
std::string redis_module_path();
// models_dir()/stories260K.gguf
std::string stories_model_path();

struct RedisFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisConn = std::unique_ptr<redisContext, RedisFree>;
using Reply = std::unique_ptr<redisReply, ReplyFree>;

class RedisServer {
 public:
  explicit RedisServer(RedisServerOptions opts = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  // A new RESP2 connection with a read timeout (default 30 s); throws when it cannot connect.
  RedisConn connect(int timeout_ms = 30000) const;
  // True while the process is running.
  bool alive() const;
  // With expect_exit: the server's wait status (WIFEXITED, WIFSIGNALED ...); else -1.
  int exit_status() const { return exit_status_; }
  std::string log() const;

 private:
  void start(const RedisServerOptions& opts);
  void stop();
  pid_t pid_ = -1;
  int exit_status_ = -1;
  int port_ = 0;
  std::string dir_;
};

// Sends argv (binary safe) and returns the reply; null on I/O error or timeout.
Reply command(redisContext* c, const std::vector<std::string>& argv);
// Sends argv without waiting for the reply (a command left running while the test acts on the server);
// throws on I/O error. receive() reads the reply later: null when the connection closed or timed out.
void send_command(redisContext* c, const std::vector<std::string>& argv);
Reply receive(redisContext* c);
// A directory, made once per process, holding a copy of stories260K as stories.gguf: a MODEL-DIR.
std::string stories_model_dir();
// Convenience for assertions: the reply as text ("(error) ...", "(nil)", integers, arrays as [a, b]).
std::string show(const redisReply* r);
// The value of `field` in `INFO section` as text ("" when absent), and as a number (-1 when absent).
std::string info_value(redisContext* c, const std::string& section, const std::string& field);
long long info_number(redisContext* c, const std::string& section, const std::string& field);
// Polls `done` every 5 ms: true once it holds, false when `timeout` passes first.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = std::chrono::milliseconds(20000));

// A parsed RESP3 value (type is the RESP3 type byte: + - : $ * % ~ , # _ = ( > |).
struct Resp3Value {
  char type = 0;
  std::string str;        // simple/bulk/verbatim strings, errors, big numbers, doubles as text
  long long integer = 0;  // ':' and '#' (1/0)
  std::vector<Resp3Value> elems;  // arrays, sets, pushes; maps as k1, v1, k2, v2 ...
};

// A minimal RESP3 client over a raw socket: sends HELLO 3 on connect, then commands in argv form.
class Resp3Client {
 public:
  Resp3Client(int port, int timeout_ms = 30000);
  ~Resp3Client();
  Resp3Value call(const std::vector<std::string>& argv);  // throws on I/O error, timeout or bad protocol

 private:
  char next();
  std::string line();
  Resp3Value read_value();
  int fd_ = -1;
  int timeout_ms_;
  std::string buf_;
  size_t pos_ = 0;
};

// A test suite sharing one redis-server with the module, started once per suite with
// Suite::module_args(); each test gets its own connection c_. Usage:
//   class TokensTest : public SharedServerTest<TokensTest> { public: static std::vector<std::string> module_args(); };
template <class Suite>
class SharedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RedisServer({.module_args = Suite::module_args()}); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    INFER_REQUIRE_DIR(models_dir());
    c_ = server_->connect();
  }
  std::string run(const std::vector<std::string>& argv) { return show(command(c_.get(), argv).get()); }

  static inline RedisServer* server_ = nullptr;
  RedisConn c_;
};

}  // namespace infer::test
