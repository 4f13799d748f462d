#include "gateway/redis_client.h"

#include <sys/socket.h>

namespace infer::gateway {

namespace {

timeval to_timeval(std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  return tv;
}

constexpr size_t kMaxIdle = 64;  // connections kept open between requests

}  // namespace

RedisConnection::RedisConnection(const std::string& host, int port, std::chrono::milliseconds timeout) {
  ctx_ = redisConnectWithTimeout(host.c_str(), port, to_timeval(timeout));
  if (!ctx_ || ctx_->err) {
    const std::string why = ctx_ ? ctx_->errstr : "out of memory";
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
    throw RedisUnavailable("cannot connect to Redis at " + host + ":" + std::to_string(port) + ": " + why);
  }
  set_timeout(std::chrono::milliseconds(0));  // generations block as long as the module lets them
}

RedisConnection::~RedisConnection() {
  if (ctx_) redisFree(ctx_);
}

Reply RedisConnection::command(const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
  if (!r) {
    broken_ = true;
    throw RedisUnavailable(std::string("the connection to Redis failed: ") + (ctx_->errstr[0] ? ctx_->errstr : "closed"));
  }
  return Reply(r);
}

void RedisConnection::set_timeout(std::chrono::milliseconds timeout) { redisSetTimeout(ctx_, to_timeval(timeout)); }

void RedisConnection::abort() { ::shutdown(ctx_->fd, SHUT_RDWR); }

std::unique_ptr<RedisConnection> RedisPool::take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  return std::make_unique<RedisConnection>(host_, port_, connect_timeout_);
}

void RedisPool::give_back(std::unique_ptr<RedisConnection> c, bool authenticated) {
  if (!c || c->broken()) return;
  if (authenticated) {
    try {
      Reply r = c->command({"RESET"});
      if (r->type == REDIS_REPLY_ERROR) return;
    } catch (const RedisUnavailable&) {
      return;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(c));
}

std::string reply_text(const redisReply* r) {
  if (!r) return "";
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
    return std::string(r->str, r->len);
  return "";
}

}  // namespace infer::gateway
