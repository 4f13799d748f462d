#include "redis/cluster_slots.h"

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace infer::redis {
namespace {

struct NodeLine {
  std::string id;
  std::string address;  // ip:port
  bool myself = false;
  bool replica = false;
  std::string master_id;  // of a replica
  std::vector<std::string> slots;  // "a-b", "a", "[a->-id]", "[a-<-id]"
};

std::vector<NodeLine> cluster_nodes(RedisModuleCtx* ctx) {
  std::vector<NodeLine> nodes;
  RedisModuleCallReply* r = rm::Call(ctx, "CLUSTER", "c", "NODES");
  if (!r) return nodes;
  size_t len = 0;
  const char* p = rm::CallReplyType(r) == REDISMODULE_REPLY_STRING ? rm::CallReplyStringPtr(r, &len) : nullptr;
  std::istringstream in(std::string(p ? p : "", p ? len : 0));
  rm::FreeCallReply(r);
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    NodeLine n;
    std::string flags, ping, pong, epoch, link;
    if (!(f >> n.id >> n.address >> flags >> n.master_id >> ping >> pong >> epoch >> link)) continue;
    n.address = n.address.substr(0, n.address.find('@'));
    n.myself = flags.find("myself") != std::string::npos;
    n.replica = flags.find("slave") != std::string::npos;
    for (std::string s; f >> s;) n.slots.push_back(s);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// Whether `slots` (a node's tokens) serves `slot` as a range or a single slot.
bool serves(const NodeLine& n, unsigned slot) {
  for (const std::string& s : n.slots) {
    if (s.empty() || s[0] == '[') continue;
    const size_t dash = s.find('-');
    const unsigned lo = static_cast<unsigned>(std::strtoul(s.c_str(), nullptr, 10));
    const unsigned hi = dash == std::string::npos ? lo : static_cast<unsigned>(std::strtoul(s.c_str() + dash + 1, nullptr, 10));
    if (slot >= lo && slot <= hi) return true;
  }
  return false;
}

// The node id `n` migrates `slot` to ("[slot->-id]"), or "".
std::string migrating_to(const NodeLine& n, unsigned slot) {
  const std::string prefix = "[" + std::to_string(slot) + "->-";
  for (const std::string& s : n.slots)
    if (s.rfind(prefix, 0) == 0) return s.substr(prefix.size(), s.size() - prefix.size() - 1);
  return "";
}

// Whether `n` imports `slot` ("[slot-<-id]").
bool imports(const NodeLine& n, unsigned slot) {
  const std::string prefix = "[" + std::to_string(slot) + "-<-";
  for (const std::string& s : n.slots)
    if (s.rfind(prefix, 0) == 0) return true;
  return false;
}

const NodeLine* myself(const std::vector<NodeLine>& nodes) {
  for (const NodeLine& n : nodes)
    if (n.myself) return &n;
  return nullptr;
}

const NodeLine* find_id(const std::vector<NodeLine>& nodes, const std::string& id) {
  for (const NodeLine& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

}  // namespace

unsigned key_slot(std::string_view key) {
  auto open = key.find('{');
  if (open != std::string_view::npos) {
    auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  uint16_t crc = 0;
  for (unsigned char c : key) {
    crc ^= static_cast<uint16_t>(c << 8);
    for (int b = 0; b < 8; ++b) crc = static_cast<uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc % 16384;
}

bool importing_here(RedisModuleCtx* ctx, std::string_view key) {
  if (!(rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER)) return false;
  const std::vector<NodeLine> nodes = cluster_nodes(ctx);
  const NodeLine* me = myself(nodes);
  return me && !me->replica && imports(*me, key_slot(key));
}

std::string cluster_write_refusal(RedisModuleCtx* ctx, std::string_view key, bool* migrating, bool asked) {
  if (migrating) *migrating = false;
  if (!(rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER)) return "";
  const unsigned slot = key_slot(key);
  const std::string slot_str = std::to_string(slot);
  const std::vector<NodeLine> nodes = cluster_nodes(ctx);
  const NodeLine* me = myself(nodes);
  if (me && !me->replica && asked && imports(*me, slot)) return "";
  if (me && !me->replica && serves(*me, slot)) {
    const std::string target = migrating_to(*me, slot);
    if (target.empty()) return "";
    RedisModuleString* k = rm::CreateString(ctx, key.data(), key.size());
    const bool here = rm::KeyExists(ctx, k);
    rm::FreeString(ctx, k);
    const NodeLine* to = find_id(nodes, target);
    if (here) {
      if (migrating) *migrating = true;
      return "";
    }
    return "ASK " + slot_str + " " + (to ? to->address : std::string("?"));
  }
  for (const NodeLine& n : nodes)
    if (!n.replica && serves(n, slot)) return "MOVED " + slot_str + " " + n.address;
  return "CLUSTERDOWN Hash slot " + slot_str + " not served";
}

}  // namespace infer::redis
