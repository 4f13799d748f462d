// Test helper: a real Redis Cluster on loopback (N masters + N*R replicas, default 3 + 3), every node a
// RedisServer (redis_server.h) loading the module, with helpers to find slot owners, connect to the
// owner / a non-owner / a replica, and migrate one slot in steps so a test can act in the middle.
//
// The constructor starts the nodes with `--cluster-enabled yes --cluster-config-file nodes.conf
// --cluster-node-timeout 1000 --enable-debug-command yes --appendonly no` (nodes.conf lands in each
// server's own directory), assigns the 16384 slots evenly (CLUSTER ADDSLOTSRANGE), joins the nodes
// (CLUSTER MEET), attaches the replicas (CLUSTER REPLICATE) and waits (bounded) until every node says
// cluster_state:ok, every replica's link is up and all nodes agree on the slot owners. It throws
// std::runtime_error with what it was waiting for (and the logs' tails) when that does not happen.
//
// Nodes are identified by their index (0 .. size()-1, in start order: masters first). Roles are asked
// live (ROLE), so the helpers follow failovers.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "redis/redis_server.h"

namespace infer::test {

struct RedisClusterOptions {
  int masters = 3;
  int replicas_per_master = 1;
  // After the .so path on --loadmodule; empty: {"MODEL", "stories", stories_model_path()}.
  std::vector<std::string> module_args;
  std::vector<std::string> server_args;  // extra redis-server arguments for every node
  int ready_timeout_ms = 30000;          // bound on the whole formation
};

class RedisCluster {
 public:
  explicit RedisCluster(RedisClusterOptions opts = {});
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // Empty when this redis-server can run in cluster mode (a probe node without the module answers
  // CLUSTER INFO), else why not: tests skip with that reason.
  static std::string unavailable_reason();

  size_t size() const { return nodes_.size(); }
  RedisServer& server(size_t i) { return *nodes_[i]; }
  int port(size_t i) const { return nodes_[i]->port(); }
  std::string address(size_t i) const { return "127.0.0.1:" + std::to_string(port(i)); }
  const std::string& node_id(size_t i) const { return ids_[i]; }
  // Index of the node listening on `port`; throws when none.
  size_t index_of_port(int port) const;
  RedisConn connect(size_t i, int timeout_ms = 30000) const { return nodes_[i]->connect(timeout_ms); }

  // Live roles (ROLE on every node).
  bool is_master(size_t i) const;
  std::vector<size_t> masters() const;
  std::vector<size_t> replicas() const;
  // The replicas attached to master `m` (its INFO replication), in no particular order.
  std::vector<size_t> replicas_of(size_t m) const;

  // CLUSTER KEYSLOT on a node.
  int key_slot(const std::string& key) const;
  // The master owning `slot` in the view of `asked` (default: the first current master).
  size_t node_for_slot(int slot, long asked = -1) const;
  // A master that does not own `slot`.
  size_t master_not_owning(int slot) const;
  // Connections to the master owning `slot` and to a master that does not.
  RedisConn connect_owner(int slot) const { return connect(node_for_slot(slot)); }
  RedisConn connect_non_owner(int slot) const { return connect(master_not_owning(slot)); }
  // A hash tag ("{...}") whose slot the master `m` owns, distinct on each call (a per-cluster counter).
  std::string tag_on(size_t m);

  // Bounded wait until every node says cluster_state:ok, every replica's master link is up, every
  // master has its replicas connected and all nodes agree on every slot's owner. Returns "" on
  // success, else what was still missing at the deadline.
  std::string wait_stable(int timeout_ms = 30000) const;

  // The tail of every node's log (for failure messages).
  std::string logs_tail(size_t bytes_per_node = 1500) const;

  // Moves one slot from master `from` to master `to` in the steps of redis-cli --cluster reshard.
  class SlotMigration {
   public:
    SlotMigration(RedisCluster& cluster, int slot, size_t from, size_t to);
    // CLUSTER SETSLOT IMPORTING on `to`, then MIGRATING on `from`.
    void begin();
    // MIGRATE every key now in the slot on `from` to `to` (in batches); returns how many moved.
    // Throws on a MIGRATE error (e.g. BUSYKEY: a stray key on the target).
    size_t move_keys();
    // CLUSTER SETSLOT NODE `to` on `to`, `from`, then every other master; then waits (bounded) until
    // every node names `to` as the owner.
    void finish();
    // begin + move_keys + finish.
    void run();
    int slot() const { return slot_; }

   private:
    RedisCluster& c_;
    int slot_;
    size_t from_, to_;
  };
  void migrate_slot(int slot, size_t from, size_t to) { SlotMigration(*this, slot, from, to).run(); }

 private:
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::string> ids_;
  int tag_counter_ = 0;
};

// The value of `field` in an INFO-style "field:value" text, or "" when absent.
std::string info_field(const std::string& info, const std::string& field);

}  // namespace infer::test
