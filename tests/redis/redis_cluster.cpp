#include "redis/redis_cluster.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace infer::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSlots = 16384;

std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

bool is_error(const std::string& s) { return s.rfind("(error)", 0) == 0 || s == "(no reply)"; }

// Runs argv on a fresh short-lived connection to node port; "(no reply)" when it cannot connect.
std::string ask(const RedisServer& s, const std::vector<std::string>& argv, int timeout_ms = 5000) {
  try {
    RedisConn c = s.connect(timeout_ms);
    return run(c.get(), argv);
  } catch (const std::exception&) {
    return "(no reply)";
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// slot range start -> (end, master port) in a node's CLUSTER SLOTS view; empty on error.
std::map<long long, std::pair<long long, long long>> slot_map(const RedisServer& s) {
  std::map<long long, std::pair<long long, long long>> out;
  try {
    RedisConn c = s.connect(5000);
    Reply r = command(c.get(), {"CLUSTER", "SLOTS"});
    if (!r || r->type != REDIS_REPLY_ARRAY) return out;
    for (size_t i = 0; i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[2]->type != REDIS_REPLY_ARRAY ||
          e->element[2]->elements < 2)
        continue;
      out[e->element[0]->integer] = {e->element[1]->integer, e->element[2]->element[1]->integer};
    }
  } catch (const std::exception&) {
  }
  return out;
}

}  // namespace

std::string info_field(const std::string& info, const std::string& field) {
  for (const auto& l : lines_of(info))
    if (l.rfind(field + ":", 0) == 0) return l.substr(field.size() + 1);
  return "";
}

std::string RedisCluster::unavailable_reason() {
  try {
    RedisServerOptions o;
    o.server_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"};
    o.load_module = false;
    o.start_timeout_ms = 5000;
    std::string why;
    for (int attempt = 0; attempt < 8; ++attempt) {  // see the node start below: the bus port may not fit
      try {
        RedisServer probe(o);
        std::string info = ask(probe, {"CLUSTER", "INFO"});
        if (info_field(info, "cluster_state").empty()) return "CLUSTER INFO on a cluster-enabled redis-server: " + info;
        return "";
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    return "redis-server cannot start in cluster mode: " + why;
  } catch (const std::exception& e) {
    return std::string("redis-server cannot start in cluster mode: ") + e.what();
  }
}

RedisCluster::RedisCluster(RedisClusterOptions opts) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(opts.ready_timeout_ms);
  auto left_ms = [&] {
    return static_cast<int>(
        std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
  };
  if (opts.module_args.empty()) opts.module_args = {"MODEL", "stories", stories_model_path()};
  std::vector<std::string> server_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                          "--cluster-node-timeout", "1000", "--enable-debug-command", "yes",
                                          "--appendonly", "no",
                                          // Replicas sync at once (Redis 7.0 waits 5 s for more replicas).
                                          "--repl-diskless-sync-delay", "0"};
  server_args.insert(server_args.end(), opts.server_args.begin(), opts.server_args.end());
  const int n_masters = opts.masters;
  const int n_nodes = n_masters * (1 + opts.replicas_per_master);
  if (n_masters < 1 || opts.replicas_per_master < 0) throw std::invalid_argument("RedisCluster: bad shape");

  // Start the nodes in parallel (each loads the model).
  nodes_.resize(static_cast<size_t>(n_nodes));
  std::vector<std::string> errors(static_cast<size_t>(n_nodes));
  {
    std::vector<std::thread> starters;
    for (int i = 0; i < n_nodes; ++i)
      starters.emplace_back([&, i] {
        // The cluster bus listens on port + 10000: a free port above 55535 makes redis-server exit
        // ("port number too high"), as does a bus port taken. RedisServer tries 3 ports; try more.
        for (int attempt = 0; attempt < 8; ++attempt) {
          try {
            RedisServerOptions o;
            o.module_args = opts.module_args;
            o.server_args = server_args;
            nodes_[static_cast<size_t>(i)] = std::make_unique<RedisServer>(o);
            errors[static_cast<size_t>(i)].clear();
            return;
          } catch (const std::exception& e) {
            errors[static_cast<size_t>(i)] = e.what();
          }
        }
      });
    for (auto& t : starters) t.join();
  }
  for (int i = 0; i < n_nodes; ++i)
    if (!errors[static_cast<size_t>(i)].empty())
      throw std::runtime_error("cluster node " + std::to_string(i) + " did not start: " + errors[static_cast<size_t>(i)]);

  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::string id = ask(*nodes_[i], {"CLUSTER", "MYID"});
    if (is_error(id) || id.size() != 40) throw std::runtime_error("CLUSTER MYID on node " + std::to_string(i) + ": " + id);
    ids_.push_back(id);
  }

  // Slots, evenly over the masters.
  for (int m = 0; m < n_masters; ++m) {
    int first = m * kSlots / n_masters, last = (m + 1) * kSlots / n_masters - 1;
    std::string r = ask(*nodes_[static_cast<size_t>(m)],
                        {"CLUSTER", "ADDSLOTSRANGE", std::to_string(first), std::to_string(last)});
    if (r != "OK") throw std::runtime_error("CLUSTER ADDSLOTSRANGE on node " + std::to_string(m) + ": " + r);
  }
  // Join everyone through node 0.
  for (size_t i = 1; i < nodes_.size(); ++i) {
    std::string r = ask(*nodes_[0], {"CLUSTER", "MEET", "127.0.0.1", std::to_string(port(i))});
    if (r != "OK") throw std::runtime_error("CLUSTER MEET " + address(i) + ": " + r);
  }
  // Wait until every node knows every other one (no handshake left).
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < nodes_.size() && all; ++i) {
      auto ls = lines_of(ask(*nodes_[i], {"CLUSTER", "NODES"}));
      size_t known = 0;
      for (const auto& l : ls) {
        auto w = words_of(l);
        if (w.size() >= 8 && w[2].find("handshake") == std::string::npos && w[2].find("noaddr") == std::string::npos &&
            w[7] == "connected")
          ++known;
      }
      all = known == nodes_.size();
    }
    if (all) break;
    if (left_ms() == 0) throw std::runtime_error("cluster nodes did not all meet in time\n" + logs_tail());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Replicas: replica k of master m is node n_masters + m * replicas_per_master + k.
  for (int m = 0; m < n_masters; ++m)
    for (int k = 0; k < opts.replicas_per_master; ++k) {
      size_t r = static_cast<size_t>(n_masters + m * opts.replicas_per_master + k);
      for (;;) {
        std::string reply = ask(*nodes_[r], {"CLUSTER", "REPLICATE", ids_[static_cast<size_t>(m)]});
        if (reply == "OK") break;
        if (left_ms() == 0)
          throw std::runtime_error("CLUSTER REPLICATE on node " + std::to_string(r) + ": " + reply + "\n" + logs_tail());
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  std::string missing = wait_stable(std::max(1000, left_ms()));
  if (!missing.empty()) throw std::runtime_error("cluster did not become stable: " + missing + "\n" + logs_tail());
}

RedisCluster::~RedisCluster() {
  // Stop in parallel: each stop may take a moment.
  std::vector<std::thread> stoppers;
  for (auto& n : nodes_)
    stoppers.emplace_back([&n] { n.reset(); });
  for (auto& t : stoppers) t.join();
}

size_t RedisCluster::index_of_port(int p) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (port(i) == p) return i;
  throw std::runtime_error("no cluster node on port " + std::to_string(p));
}

bool RedisCluster::is_master(size_t i) const {
  try {
    RedisConn c = connect(i, 5000);
    Reply r = command(c.get(), {"ROLE"});
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
           std::string(r->element[0]->str, r->element[0]->len) == "master";
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<size_t> RedisCluster::masters() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < size(); ++i)
    if (nodes_[i]->alive() && is_master(i)) out.push_back(i);
  return out;
}

std::vector<size_t> RedisCluster::replicas() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < size(); ++i)
    if (nodes_[i]->alive() && !is_master(i)) out.push_back(i);
  return out;
}

std::vector<size_t> RedisCluster::replicas_of(size_t m) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < size(); ++i) {
    if (i == m || !nodes_[i]->alive()) continue;
    std::string info = ask(*nodes_[i], {"INFO", "replication"});
    if (info_field(info, "role") == "slave" && info_field(info, "master_port") == std::to_string(port(m)))
      out.push_back(i);
  }
  return out;
}

int RedisCluster::key_slot(const std::string& key) const {
  for (size_t i = 0; i < size(); ++i) {
    if (!nodes_[i]->alive()) continue;
    std::string r = ask(*nodes_[i], {"CLUSTER", "KEYSLOT", key});
    if (!is_error(r)) return std::stoi(r);
  }
  throw std::runtime_error("CLUSTER KEYSLOT failed on every node");
}

size_t RedisCluster::node_for_slot(int slot, long asked) const {
  size_t from = 0;
  if (asked >= 0) {
    from = static_cast<size_t>(asked);
  } else {
    auto ms = masters();
    if (ms.empty()) throw std::runtime_error("no master answers");
    from = ms.front();
  }
  auto map = slot_map(*nodes_[from]);
  for (const auto& [first, range] : map)
    if (slot >= first && slot <= range.first) return index_of_port(static_cast<int>(range.second));
  throw std::runtime_error("node " + std::to_string(from) + " knows no owner of slot " + std::to_string(slot));
}

size_t RedisCluster::master_not_owning(int slot) const {
  size_t owner = node_for_slot(slot);
  for (size_t m : masters())
    if (m != owner) return m;
  throw std::runtime_error("no master other than the owner of slot " + std::to_string(slot));
}

std::string RedisCluster::tag_on(size_t m) {
  for (int tries = 0; tries < 10000; ++tries) {
    std::string tag = "{t" + std::to_string(tag_counter_++) + "}";
    if (node_for_slot(key_slot(tag)) == m) return tag;
  }
  throw std::runtime_error("no hash tag found for node " + std::to_string(m));
}

std::string RedisCluster::wait_stable(int timeout_ms) const {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string missing;
  for (;;) {
    missing.clear();
    std::map<long long, std::pair<long long, long long>> reference;
    bool have_reference = false;
    for (size_t i = 0; i < size() && missing.empty(); ++i) {
      if (!nodes_[i]->alive()) {
        missing = "node " + std::to_string(i) + " is not running";
        break;
      }
      std::string info = ask(*nodes_[i], {"CLUSTER", "INFO"});
      if (info_field(info, "cluster_state") != "ok") {
        missing = "node " + std::to_string(i) + " cluster_state " + info_field(info, "cluster_state");
        break;
      }
      std::string repl = ask(*nodes_[i], {"INFO", "replication"});
      if (info_field(repl, "role") == "slave" && info_field(repl, "master_link_status") != "up") {
        missing = "replica " + std::to_string(i) + " master_link_status " + info_field(repl, "master_link_status");
        break;
      }
      auto map = slot_map(*nodes_[i]);
      if (!have_reference) {
        reference = map;
        have_reference = true;
      } else if (map != reference) {
        missing = "node " + std::to_string(i) + " disagrees with node 0 on the slot owners";
      }
    }
    if (missing.empty()) {
      // Every master has its replicas connected (as many as nodes name it as their master).
      for (size_t i = 0; i < size() && missing.empty(); ++i) {
        std::string repl = ask(*nodes_[i], {"INFO", "replication"});
        if (info_field(repl, "role") != "master") continue;
        size_t expected = 0;
        for (size_t j = 0; j < size(); ++j) {
          if (j == i) continue;
          std::string rj = ask(*nodes_[j], {"INFO", "replication"});
          if (info_field(rj, "role") == "slave" && info_field(rj, "master_port") == std::to_string(port(i))) ++expected;
        }
        std::string connected = info_field(repl, "connected_slaves");
        if (connected != std::to_string(expected))
          missing = "master " + std::to_string(i) + " has " + connected + " replicas connected, expected " +
                    std::to_string(expected);
        // A replica listed as wait_bgsave or send_bulk is not yet online.
        for (const auto& l : lines_of(repl))
          if (l.rfind("slave", 0) == 0 && l.find("state=online") == std::string::npos &&
              l.find("connected_slaves") == std::string::npos)
            missing = "master " + std::to_string(i) + " replica not online: " + l;
      }
    }
    if (missing.empty()) return "";
    if (Clock::now() > deadline) return missing;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string RedisCluster::logs_tail(size_t bytes_per_node) const {
  std::string out;
  for (size_t i = 0; i < size(); ++i) {
    if (!nodes_[i]) continue;
    std::string l = nodes_[i]->log();
    if (l.size() > bytes_per_node) l = l.substr(l.size() - bytes_per_node);
    out += "--- node " + std::to_string(i) + " (" + address(i) + ") log tail:\n" + l;
  }
  return out;
}

RedisCluster::SlotMigration::SlotMigration(RedisCluster& cluster, int slot, size_t from, size_t to)
    : c_(cluster), slot_(slot), from_(from), to_(to) {}

void RedisCluster::SlotMigration::begin() {
  std::string s = std::to_string(slot_);
  std::string r = ask(c_.server(to_), {"CLUSTER", "SETSLOT", s, "IMPORTING", c_.node_id(from_)});
  if (r != "OK") throw std::runtime_error("SETSLOT " + s + " IMPORTING on node " + std::to_string(to_) + ": " + r);
  r = ask(c_.server(from_), {"CLUSTER", "SETSLOT", s, "MIGRATING", c_.node_id(to_)});
  if (r != "OK") throw std::runtime_error("SETSLOT " + s + " MIGRATING on node " + std::to_string(from_) + ": " + r);
}

size_t RedisCluster::SlotMigration::move_keys() {
  RedisConn c = c_.connect(from_);
  size_t moved = 0;
  for (;;) {
    Reply keys = command(c.get(), {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot_), "100"});
    if (!keys || keys->type != REDIS_REPLY_ARRAY) throw std::runtime_error("GETKEYSINSLOT: " + show(keys.get()));
    if (keys->elements == 0) return moved;
    std::vector<std::string> argv = {"MIGRATE", "127.0.0.1", std::to_string(c_.port(to_)), "", "0", "5000", "KEYS"};
    for (size_t i = 0; i < keys->elements; ++i) argv.emplace_back(keys->element[i]->str, keys->element[i]->len);
    std::string r = show(command(c.get(), argv).get());
    if (r != "OK" && r != "NOKEY")
      throw std::runtime_error("MIGRATE of slot " + std::to_string(slot_) + " to node " + std::to_string(to_) + ": " + r);
    moved += keys->elements;
  }
}

void RedisCluster::SlotMigration::finish() {
  std::string s = std::to_string(slot_);
  const std::string& id = c_.node_id(to_);
  std::vector<size_t> order = {to_, from_};
  for (size_t m : c_.masters())
    if (m != to_ && m != from_) order.push_back(m);
  for (size_t n : order) {
    std::string r = ask(c_.server(n), {"CLUSTER", "SETSLOT", s, "NODE", id});
    if (r != "OK") throw std::runtime_error("SETSLOT " + s + " NODE on node " + std::to_string(n) + ": " + r);
  }
  // Replicas learn it by gossip: wait (bounded) until every node names the new owner.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < c_.size() && all; ++i) {
      if (!c_.server(i).alive()) continue;
      try {
        all = c_.node_for_slot(slot_, static_cast<long>(i)) == to_;
      } catch (const std::exception&) {
        all = false;
      }
    }
    if (all) return;
    if (Clock::now() > deadline)
      throw std::runtime_error("not every node names node " + std::to_string(to_) + " as owner of slot " + s);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void RedisCluster::SlotMigration::run() {
  begin();
  move_keys();
  finish();
}

}  // namespace infer::test
