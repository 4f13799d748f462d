// Where a request's commands go. One node: the --redis node. A cluster (--cluster): the primaries that
// CLUSTER SLOTS lists, one per request in turn, so keyless generations spread over the cluster; the
// request's stream key carries a hash tag of a slot that primary owns, so every command of one request
// goes to one node (no redirection while slots stay put). A redirection (slots moved) re-reads the map.
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/redis_client.h"

namespace infer::gateway {

// The cluster hash slot of `key` (CRC16/XMODEM of the key, or of its first non-empty {...} tag, mod 16384).
int key_slot(const std::string& key);

class Router {
 public:
  struct Target {
    RedisPool* pool;
    std::string tag;  // "{...}" naming a slot the node owns; "" for a single node
  };

  // Throws RedisUnavailable when a cluster's slot map cannot be read.
  Router(std::string host, int port, bool cluster);

  // The node for the next request (round robin over the primaries).
  Target pick();
  // The primary owning `key`'s slot (the one node for a single node).
  Target owner(const std::string& key);
  // Re-reads the slot map (after MOVED, ASK, TRYAGAIN or CLUSTERDOWN), at most once a second unless
  // `now` (a redirection the caller follows at once).
  void refresh(bool now = false);
  bool cluster() const { return cluster_; }
  size_t nodes() const;

 private:
  void load_slots(RedisConnection& c);  // mu_ held
  RedisPool* pool_for(const std::string& host, int port);  // mu_ held

  std::string host_;
  int port_;
  bool cluster_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<RedisPool>> pools_;  // by "host:port"; never removed (Targets point in)
  std::vector<Target> primaries_;
  std::vector<std::pair<std::pair<int, int>, size_t>> ranges_;  // slot range -> index in primaries_
  std::atomic<size_t> next_{0};
  std::chrono::steady_clock::time_point refreshed_{};
};

// True for the replies that say the slot map changed: MOVED, ASK, TRYAGAIN, CLUSTERDOWN.
bool is_redirection(const std::string& error);

}  // namespace infer::gateway
