// The gateway's side of Redis: one hiredis connection (RESP2) per request in flight, taken from a pool.
// A connection that carried a request's `AUTH` is `RESET` before it goes back, so a pooled connection
// is always the default user's; one that failed is dropped, never reused.
#pragma once
#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace infer::gateway {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Redis could not be reached, or the connection broke mid-command (the gateway answers 503).
struct RedisUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class RedisConnection {
 public:
  // Throws RedisUnavailable.
  RedisConnection(const std::string& host, int port, std::chrono::milliseconds timeout);
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;
  ~RedisConnection();

  // Sends argv and reads the reply (an error reply is a reply); throws RedisUnavailable when the
  // connection fails, after which the connection is broken().
  Reply command(const std::vector<std::string>& argv);
  // Read timeout for the next commands (0: none, for a command that blocks until its work is done).
  void set_timeout(std::chrono::milliseconds timeout);
  // Makes a command blocked on this connection fail at once (a client that went away): the server
  // sees the disconnect and cancels what the connection was running. Safe from another thread.
  void abort();
  bool broken() const { return broken_; }

 private:
  redisContext* ctx_ = nullptr;
  bool broken_ = false;
};

class RedisPool {
 public:
  RedisPool(std::string host, int port, std::chrono::milliseconds connect_timeout)
      : host_(std::move(host)), port_(port), connect_timeout_(connect_timeout) {}

  // A pooled connection, or a new one (throws RedisUnavailable).
  std::unique_ptr<RedisConnection> take();
  // Returns a connection: `authenticated` ones are RESET first; broken ones are dropped.
  void give_back(std::unique_ptr<RedisConnection> c, bool authenticated);

  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  std::string host_;
  int port_;
  std::chrono::milliseconds connect_timeout_;
  std::mutex mu_;
  std::vector<std::unique_ptr<RedisConnection>> idle_;
};

// The reply's text for strings, statuses and errors ("" otherwise).
std::string reply_text(const redisReply* r);

}  // namespace infer::gateway
