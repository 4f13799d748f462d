// Element name → node id for a vector set. One hash map while the set is small; past kSplitAt names it
// splits once into kShards maps chosen by the name's hash, so that growing a large set rehashes a
// shard (1/256 of the names), never the whole table, inside one VADD on Redis's main thread
// (MainThreadBudget; a whole-table rehash of millions of names takes tens of milliseconds).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace infer::vector {

class IdMap {
 public:
  static constexpr size_t kSplitAt = 65536;
  static constexpr size_t kShards = 256;

  std::optional<uint32_t> get(std::string_view name) const {
    const Map& m = shards_[shard_of(name)];
    auto it = m.find(name);
    if (it == m.end()) return std::nullopt;
    return it->second;
  }
  bool contains(std::string_view name) const { return get(name).has_value(); }
  // Inserts or overwrites.
  void set(const std::string& name, uint32_t id) {
    auto [it, added] = shards_[shard_of(name)].insert_or_assign(name, id);
    if (added && ++size_ == kSplitAt && shards_.size() == 1) split();
  }
  bool erase(std::string_view name) {
    Map& m = shards_[shard_of(name)];
    auto it = m.find(name);
    if (it == m.end()) return false;
    m.erase(it);
    --size_;
    return true;
  }
  size_t size() const { return size_; }
  size_t shards() const { return shards_.size(); }
  // The names in the largest shard: what one growth may rehash.
  size_t largest_shard() const {
    size_t n = 0;
    for (const Map& m : shards_) n = std::max(n, m.size());
    return n;
  }
  // Nodes, bucket arrays and the names' heap bytes (an estimate for MEMORY USAGE).
  size_t memory_bytes() const {
    size_t bytes = shards_.size() * sizeof(Map);
    for (const Map& m : shards_) {
      bytes += m.size() * (sizeof(std::string) + 32 + 16) + m.bucket_count() * sizeof(void*);
      for (const auto& [k, v] : m) bytes += k.capacity();
    }
    return bytes;
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Map = std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>>;

  size_t shard_of(std::string_view name) const {
    // The top bits choose the shard; the map's buckets use the low ones.
    return shards_.size() == 1 ? 0 : (Hash{}(name) >> 56) % kShards;
  }
  void split() {
    Map all = std::move(shards_[0]);
    shards_ = std::vector<Map>(kShards);
    for (auto& node : all) shards_[shard_of(node.first)].emplace(std::move(node.first), node.second);
  }

  std::vector<Map> shards_ = std::vector<Map>(1);
  size_t size_ = 0;
};

}  // namespace infer::vector
