// A Hierarchical Navigable Small World graph (Malkov & Yashunin) over encoded vectors, written for vector
// sets because they need what hnswlib 0.6.2 lacks: real deletion that unlinks a node and repairs its
// neighbours (no tombstones), search with a filter predicate and a bound on inspected candidates, our own
// quantised storage, and a graph that can be saved and restored node by node without re-inserting.
//
// Ids are dense slot numbers; a removed node's slot is reused by a later insert. Links are directed as in
// HNSW, and every node also keeps its incoming links so that removal touches only its neighbourhood.
// Node levels come from a caller-provided 64-bit seed, so the same operations in the same order build the
// same graph (masters and replicas agree).
//
// Thread-safety: none. One caller at a time, including searches (they share a visited-list buffer).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "vector/quant.h"

namespace infer::vector {

class Hnsw {
 public:
  struct Params {
    Quant quant = Quant::Q8;
    uint32_t dim = 0;
    uint32_t m = 16;                 // links per node on levels > 0; level 0 keeps 2·m
    uint32_t ef_construction = 200;  // beam width while inserting
  };
  struct Hit {
    uint32_t id;
    float distance;  // 1 - cos
  };
  // Returns true when the node may be returned by a search.
  using Predicate = std::function<bool(uint32_t id)>;

  explicit Hnsw(const Params& p);

  // Inserts an encoded vector (encoded_size(quant, dim) bytes, copied) and returns its id. `ef`: beam
  // width for this insert, 0 → params().ef_construction.
  uint32_t insert(const uint8_t* encoded, uint64_t level_seed, uint32_t ef = 0);
  // Unlinks the node, reconnects the nodes that pointed at it, frees its memory and slot.
  void remove(uint32_t id);

  // Approximate k nearest neighbours of an encoded query, closest first. `ef` is the beam width (raised
  // to k). With a predicate, only accepted nodes are returned and the walk goes on past the usual
  // stopping point until k are found or `filter_ef` candidates have been inspected.
  std::vector<Hit> search(const uint8_t* query, size_t k, size_t ef, const Predicate* accept = nullptr,
                          size_t filter_ef = 0) const;
  // Exact k nearest neighbours by a linear scan.
  std::vector<Hit> brute_force(const uint8_t* query, size_t k, const Predicate* accept = nullptr) const;

  const Params& params() const { return p_; }
  size_t size() const { return count_; }
  uint32_t slots() const { return static_cast<uint32_t>(nodes_.size()); }  // ids are < slots()
  bool contains(uint32_t id) const { return id < nodes_.size() && nodes_[id] != nullptr; }
  const uint8_t* vector(uint32_t id) const { return nodes_[id]->vec.data(); }
  int level(uint32_t id) const { return nodes_[id]->level; }
  const std::vector<uint32_t>& links(uint32_t id, int level) const { return nodes_[id]->out[level]; }
  int max_level() const { return max_level_; }
  int64_t entry_point() const { return count_ ? static_cast<int64_t>(entry_) : -1; }
  size_t memory_bytes() const;
  size_t max_links(int level) const { return level == 0 ? 2 * p_.m : p_.m; }

  // Restoring a saved graph: place every node with its out-links, then finish_restore() rebuilds the
  // incoming links and checks that every link names a node that exists. Throws std::runtime_error.
  void restore_node(uint32_t id, int level, const uint8_t* encoded, std::vector<std::vector<uint32_t>> out);
  void finish_restore(uint32_t entry);

  static int level_for_seed(uint64_t seed, uint32_t m);

 private:
  struct Node {
    std::vector<uint8_t> vec;
    std::vector<std::vector<uint32_t>> out, in;  // per level
    int level = 0;
  };
  using Pair = std::pair<float, uint32_t>;  // (distance, id)

  float dist(const uint8_t* q, uint32_t id) const { return distance(p_.quant, q, nodes_[id]->vec.data(), p_.dim); }
  float dist(uint32_t a, uint32_t b) const { return dist(nodes_[a]->vec.data(), b); }
  uint32_t greedy(const uint8_t* q, uint32_t ep, int from_level, int to_level) const;
  // Beam search on one level; returns up to ef (distance, id) pairs, unordered.
  std::vector<Pair> search_level(const uint8_t* q, uint32_t ep, size_t ef, int level) const;
  // HNSW neighbour-selection heuristic: keeps a candidate only when it is closer to the base than to
  // every candidate already kept. `cands` must be sorted by distance to the base.
  std::vector<uint32_t> select(const std::vector<Pair>& cands, size_t max) const;
  void set_links(uint32_t id, int level, std::vector<uint32_t> links);
  void add_link(uint32_t from, uint32_t to, int level);
  void begin_visit() const;

  Params p_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<uint32_t> free_;
  size_t count_ = 0;
  uint32_t entry_ = 0;
  int max_level_ = -1;
  mutable std::vector<uint32_t> visited_;
  mutable uint32_t epoch_ = 0;
};

}  // namespace infer::vector
