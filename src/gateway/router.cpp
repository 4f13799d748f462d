#include "gateway/router.h"

#include <cstdint>
#include <utility>

namespace infer::gateway {

namespace {

constexpr auto kConnectTimeout = std::chrono::milliseconds(2000);

uint16_t crc16(const char* p, size_t n) {
  uint16_t crc = 0;
  for (size_t i = 0; i < n; ++i) {
    crc ^= static_cast<uint16_t>(static_cast<uint8_t>(p[i])) << 8;
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

}  // namespace

int key_slot(const std::string& key) {
  const size_t open = key.find('{');
  if (open != std::string::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string::npos && close > open + 1) return crc16(key.data() + open + 1, close - open - 1) % 16384;
  }
  return crc16(key.data(), key.size()) % 16384;
}

bool is_redirection(const std::string& e) {
  for (const char* p : {"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN"})
    if (e.rfind(p, 0) == 0) return true;
  return false;
}

Router::Router(std::string host, int port, bool cluster) : host_(std::move(host)), port_(port), cluster_(cluster) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cluster_) {
    primaries_.push_back({pool_for(host_, port_), ""});
    return;
  }
  RedisConnection c(host_, port_, kConnectTimeout);
  load_slots(c);
}

RedisPool* Router::pool_for(const std::string& host, int port) {
  auto& p = pools_[host + ":" + std::to_string(port)];
  if (!p) p = std::make_unique<RedisPool>(host, port, kConnectTimeout);
  return p.get();
}

void Router::load_slots(RedisConnection& c) {
  Reply r = c.command({"CLUSTER", "SLOTS"});
  if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
    throw RedisUnavailable("--cluster: CLUSTER SLOTS gave no slot map (" + reply_text(r.get()) + ")");
  // Each entry: start, end, [host, port, id], replicas...; the ranges of one primary are gathered.
  std::map<std::string, std::pair<std::pair<std::string, int>, std::vector<std::pair<int, int>>>> by_node;
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2)
      continue;
    std::string host = reply_text(e->element[2]->element[0]);
    if (host.empty() || host == "?") host = host_;  // a node that does not know its address: the seed's
    const int port = static_cast<int>(e->element[2]->element[1]->integer);
    auto& node = by_node[host + ":" + std::to_string(port)];
    node.first = {host, port};
    node.second.emplace_back(static_cast<int>(e->element[0]->integer), static_cast<int>(e->element[1]->integer));
  }
  std::vector<Target> primaries;
  std::vector<std::pair<std::pair<int, int>, size_t>> ranges;
  for (auto& [name, node] : by_node) {
    for (const auto& range : node.second) ranges.emplace_back(range, primaries.size());
    std::string tag;
    for (int i = 0; tag.empty() && i < 1 << 20; ++i) {
      const std::string t = std::to_string(i);
      const int slot = crc16(t.data(), t.size()) % 16384;
      for (const auto& [lo, hi] : node.second)
        if (slot >= lo && slot <= hi) tag = "{" + t + "}";
    }
    primaries.push_back({pool_for(node.first.first, node.first.second), tag});
  }
  if (primaries.empty()) throw RedisUnavailable("--cluster: CLUSTER SLOTS names no primary");
  primaries_ = std::move(primaries);
  ranges_ = std::move(ranges);
  refreshed_ = std::chrono::steady_clock::now();
}

Router::Target Router::pick() {
  std::lock_guard<std::mutex> lock(mu_);
  return primaries_[next_++ % primaries_.size()];
}

Router::Target Router::owner(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cluster_) return primaries_[0];
  const int slot = key_slot(key);
  for (const auto& [range, index] : ranges_)
    if (slot >= range.first && slot <= range.second) return primaries_[index];
  return primaries_[next_++ % primaries_.size()];  // an unassigned slot: Redis will say CLUSTERDOWN
}

void Router::refresh(bool now) {
  if (!cluster_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!now && std::chrono::steady_clock::now() - refreshed_ < std::chrono::seconds(1)) return;
  refreshed_ = std::chrono::steady_clock::now();
  for (const Target& t : primaries_) {
    try {
      RedisConnection c(t.pool->host(), t.pool->port(), kConnectTimeout);
      load_slots(c);
      return;
    } catch (const RedisUnavailable&) {
    }
  }
}

size_t Router::nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return primaries_.size();
}

}  // namespace infer::gateway
