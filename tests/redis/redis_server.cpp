#include "redis/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/data_dirs.h"

#ifndef INFER_REDIS_MODULE_PATH
#define INFER_REDIS_MODULE_PATH "redis_infer.so"
#endif

namespace infer::test {
namespace {

int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot find a free loopback port");
  }
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

using Clock = std::chrono::steady_clock;

}  // namespace

std::string redis_module_path() {
  if (const char* b = std::getenv("INFER_BUILD_DIR"); b && *b) return std::string(b) + "/src/redis/redis_infer.so";
  return INFER_REDIS_MODULE_PATH;
}

std::string stories_model_path() { return models_dir() + "/stories260K.gguf"; }

RedisServer::RedisServer(RedisServerOptions opts) {
  char tmpl[] = "/tmp/infer-redis-test-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  // The port may be taken between the probe and the bind: try a few.
  std::string last_error;
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      start(opts);
      return;
    } catch (const std::exception& e) {
      last_error = e.what();
      stop();
    }
  }
  throw std::runtime_error(last_error);
}

RedisServer::~RedisServer() {
  stop();
  std::string cmd = "rm -rf '" + dir_ + "'";
  if (std::system(cmd.c_str()) != 0) {
  }
}

void RedisServer::start(const RedisServerOptions& opts) {
  port_ = free_loopback_port();
  std::vector<std::string> args = {"redis-server"};
  if (!opts.config_file.empty()) args.push_back(opts.config_file);
  args.insert(args.end(), {"--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                           "--dir", dir_, "--daemonize", "no", "--logfile", dir_ + "/redis.log"});
  if (opts.load_module) {
    args.push_back("--loadmodule");
    args.push_back(opts.module_path.empty() ? redis_module_path() : opts.module_path);
    args.insert(args.end(), opts.module_args.begin(), opts.module_args.end());
  }
  args.insert(args.end(), opts.server_args.begin(), opts.server_args.end());
#ifdef INFER_SECCOMP_EXEC_PATH
  if (opts.seccomp_like_systemd) args.insert(args.begin(), INFER_SECCOMP_EXEC_PATH);
#else
  if (opts.seccomp_like_systemd) throw std::runtime_error("seccomp_exec was not built");
#endif

  // argv and the environment are built before fork: the child of a threaded process may only exec.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
#ifdef INFER_SANITIZER_RUNTIME
  // A sanitizer-built module needs the sanitizer's runtime loaded before it (tests/redis/CMakeLists.txt).
  std::erase_if(env, [](const std::string& e) { return e.starts_with("LD_PRELOAD="); });
  env.emplace_back("LD_PRELOAD=" INFER_SANITIZER_RUNTIME);
#endif
  std::vector<char*> cargv, cenv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    execvpe(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  auto deadline = Clock::now() + std::chrono::milliseconds(opts.start_timeout_ms);
  while (opts.expect_exit && Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_status_ = status;
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (opts.expect_exit) throw std::runtime_error("redis-server was expected to exit during startup:\n" + log());
  while (Clock::now() < deadline) {
    if (!alive()) throw std::runtime_error("redis-server exited during startup:\n" + log());
    redisContext* c = redisConnect("127.0.0.1", port_);
    if (c && !c->err) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      bool ok = r && r->type == REDIS_REPLY_STATUS && std::strcmp(r->str, "PONG") == 0;
      if (r) freeReplyObject(r);
      redisFree(c);
      if (ok) return;
    } else if (c) {
      redisFree(c);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("redis-server did not answer PING within " + std::to_string(opts.start_timeout_ms) +
                           " ms:\n" + log());
}

void RedisServer::stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
}

bool RedisServer::alive() const {
  if (pid_ <= 0) return false;
  int status = 0;
  return waitpid(pid_, &status, WNOHANG) == 0;
}

std::string RedisServer::log() const {
  std::ifstream f(dir_ + "/redis.log");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

RedisConn RedisServer::connect(int timeout_ms) const {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
  if (!c || c->err) {
    std::string why = c ? c->errstr : "out of memory";
    if (c) redisFree(c);
    throw std::runtime_error("cannot connect to redis on port " + std::to_string(port_) + ": " + why);
  }
  redisSetTimeout(c, tv);
  return RedisConn(c);
}

void send_command(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data()) != REDIS_OK)
    throw std::runtime_error("cannot queue a command: " + std::string(c->errstr));
  for (int done = 0; !done;)
    if (redisBufferWrite(c, &done) != REDIS_OK) throw std::runtime_error("cannot send a command: " + std::string(c->errstr));
}

Reply receive(redisContext* c) {
  void* raw = nullptr;
  if (redisGetReply(c, &raw) != REDIS_OK) return nullptr;
  return Reply(static_cast<redisReply*>(raw));
}

std::string stories_model_dir() {
  static const std::string dir = [] {
    const std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("infer-stories-dir-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::filesystem::copy_file(stories_model_path(), d / "stories.gguf",
                               std::filesystem::copy_options::overwrite_existing);
    return d.string();
  }();
  return dir;
}

Reply command(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data())));
}

std::string info_value(redisContext* c, const std::string& section, const std::string& field) {
  const std::string info = show(command(c, {"INFO", section}).get());
  const size_t at = info.find("\n" + field + ":");
  if (at == std::string::npos) return "";
  const size_t start = at + field.size() + 2;
  return info.substr(start, info.find_first_of("\r\n", start) - start);
}

long long info_number(redisContext* c, const std::string& section, const std::string& field) {
  const std::string v = info_value(c, section, field);
  return v.empty() ? -1 : std::atoll(v.c_str());
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string show(const redisReply* r) {
  if (!r) return "(no reply)";
  switch (r->type) {
    case REDIS_REPLY_ERROR:
      return "(error) " + std::string(r->str, r->len);
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_STRING:
      return std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string s = "[";
      for (size_t i = 0; i < r->elements; ++i) s += (i ? ", " : "") + show(r->element[i]);
      return s + "]";
    }
  }
  return "(?)";
}

Resp3Client::Resp3Client(int port, int timeout_ms) : timeout_ms_(timeout_ms) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw std::runtime_error("RESP3 client cannot connect");
  Resp3Value hello = call({"HELLO", "3"});
  if (hello.type != '%') throw std::runtime_error("HELLO 3 did not return a map");
}

Resp3Client::~Resp3Client() {
  if (fd_ >= 0) close(fd_);
}

Resp3Value Resp3Client::call(const std::vector<std::string>& argv) {
  std::string out = "*" + std::to_string(argv.size()) + "\r\n";
  for (const auto& a : argv) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  for (size_t sent = 0; sent < out.size();) {
    ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("RESP3 send failed");
    sent += static_cast<size_t>(n);
  }
  return read_value();
}

char Resp3Client::next() {
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms_) <= 0) throw std::runtime_error("RESP3 read timed out");
    char tmp[4096];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) throw std::runtime_error("RESP3 connection closed");
    buf_.assign(tmp, static_cast<size_t>(n));
  }
  return buf_[pos_++];
}

std::string Resp3Client::line() {
  std::string s;
  for (char c = next();; c = next()) {
    if (c == '\r') {
      if (next() != '\n') throw std::runtime_error("RESP3: CR without LF");
      return s;
    }
    s += c;
  }
}

Resp3Value Resp3Client::read_value() {
  Resp3Value v;
  v.type = next();
  switch (v.type) {
    case '+':
    case '-':
    case ',':
    case '(':
      v.str = line();
      return v;
    case ':':
      v.integer = std::stoll(line());
      return v;
    case '#':
      v.integer = line() == "t" ? 1 : 0;
      return v;
    case '_':
      line();
      return v;
    case '$':
    case '=':
    case '!': {
      long long n = std::stoll(line());
      if (n < 0) return v;
      for (long long i = 0; i < n; ++i) v.str += next();
      line();
      return v;
    }
    case '*':
    case '~':
    case '>':
    case '%':
    case '|': {
      long long n = std::stoll(line());
      if (v.type == '%' || v.type == '|') n *= 2;
      for (long long i = 0; i < n; ++i) v.elems.push_back(read_value());
      if (v.type == '|') return read_value();  // attributes precede the real reply
      return v;
    }
  }
  throw std::runtime_error(std::string("RESP3: unknown type byte '") + v.type + "'");
}

}  // namespace infer::test
