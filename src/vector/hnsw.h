// A Hierarchical Navigable Small World graph (Malkov & Yashunin) over encoded vectors, written for vector
// sets because they need what hnswlib 0.6.2 lacks: real deletion that unlinks a node and repairs its
// neighbours (no tombstones), search with a filter predicate and a bound on inspected candidates, our own
// quantised storage, and a graph that can be saved and restored node by node without re-inserting.
//
// Layout: ids are dense slot numbers 0..size()-1 (removal moves the last node into the freed slot). The vectors of
// all slots sit in one flat buffer and the level-0 links in another (count + 2·M ids per slot), so a
// search touches two arrays instead of chasing a pointer per node; the few upper-level links live per
// node. Links are directed as in HNSW, and every node also keeps its incoming links so that removal
// touches only its neighbourhood. Node levels come from a caller-provided 64-bit seed, so the same
// operations in the same order build the same graph (masters and replicas agree, on CPUs with the same
// distance kernels).
//
// Thread-safety: const members (search, brute_force, accessors) may run concurrently with each other
// (each thread keeps its own visited marks); insert, remove and restore need exclusive access.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "vector/quant.h"
#include "vector/slot_chunks.h"

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

  // Node levels are 0..kMaxLevel.
  static constexpr int kMaxLevel = 16;

  explicit Hnsw(const Params& p);

  // An insert's neighbour searches, done ahead under a shared lock (VADD ... CAS on a search thread):
  // the level the node would get, and per level the entry it started from, the candidates found and the
  // distances spent. insert() reuses a level's search when the graph has not changed since (`version`)
  // and the search would have run the same there (same entry point, within that level's budget), so
  // the graph is the one a plain insert builds; any other level is searched again.
  struct PreparedInsert {
    struct Level {
      uint32_t ep = 0;
      size_t spent = 0;
      bool stopped = false;  // ran out of its budget: not reusable
      std::vector<std::pair<float, uint32_t>> cands;
    };
    uint64_t version = 0;
    int level = 0;
    uint32_t ef = 0;
    std::vector<Level> levels;  // by level; empty for the first node
  };
  PreparedInsert prepare_insert(const uint8_t* encoded, uint64_t level_seed, uint32_t ef = 0) const;

  // Inserts an encoded vector (encoded_size(quant, dim) bytes, copied) and returns its id. `ef`: beam
  // width for this insert, 0 → params().ef_construction. Nodes that pruning cut off are relinked.
  // `prepared`: prepare_insert() of the same vector, seed and ef (see there).
  uint32_t insert(const uint8_t* encoded, uint64_t level_seed, uint32_t ef = 0,
                  const PreparedInsert* prepared = nullptr);
  // Changes with every insert, removal and restore: a PreparedInsert of another version is stale.
  uint64_t version() const { return version_; }
  // Unlinks the node and reconnects the nodes that pointed at it (a node left cut off gets a link from a
  // reachable node near it, so every node stays reachable); then the last node moves into its slot so
  // that ids stay dense and the memory shrinks. Returns the old id of the node that now has `id`, or
  // nullopt when `id` was the last one.
  std::optional<uint32_t> remove(uint32_t id);

  // Approximate k nearest neighbours of an encoded query, closest first. `ef` is the beam width (raised
  // to k). With a predicate, only accepted nodes are returned and the walk goes on past the usual
  // stopping point until k are found or `filter_ef` candidates have been inspected.
  std::vector<Hit> search(const uint8_t* query, size_t k, size_t ef, const Predicate* accept = nullptr,
                          size_t filter_ef = 0) const;
  // Exact k nearest neighbours by a linear scan.
  std::vector<Hit> brute_force(const uint8_t* query, size_t k, const Predicate* accept = nullptr) const;

  const Params& params() const { return p_; }
  size_t size() const { return count_; }
  uint32_t slots() const { return static_cast<uint32_t>(levels_.size()); }  // ids are < slots(); == size() but while restoring
  bool contains(uint32_t id) const { return id < levels_.size() && levels_[id] >= 0; }
  const uint8_t* vector(uint32_t id) const { return vecs_.at(id); }
  int level(uint32_t id) const { return levels_[id]; }
  std::span<const uint32_t> links(uint32_t id, int level) const {
    const uint32_t* b = block(id, level);
    return {b + 1, b[0]};
  }
  int max_level() const { return max_level_; }
  // 1 - cos between two nodes' vectors (VLINKS scores).
  float distance(uint32_t a, uint32_t b) const { return dist(vector(a), b); }
  int64_t entry_point() const { return count_ ? static_cast<int64_t>(entry_) : -1; }
  size_t memory_bytes() const;
  size_t max_links(int level) const { return level == 0 ? 2 * p_.m : p_.m; }
  // Nodes on `level` (or above) that no search walk reaches: from the entry point along its level's
  // links, then on each lower level from every node reached above. Empty when the graph is sound. For
  // tests: it visits every node.
  std::vector<uint32_t> unreachable(int level) const;

  // Restoring a saved graph: place every node with its out-links, then finish_restore() rebuilds the
  // incoming links and checks that every link names a node that exists. Throws std::runtime_error.
  void restore_node(uint32_t id, int level, const uint8_t* encoded, const std::vector<std::vector<uint32_t>>& out);
  void finish_restore(uint32_t entry);

  static int level_for_seed(uint64_t seed, uint32_t m);

 private:
  using Pair = std::pair<float, uint32_t>;  // (distance, id)

  // A node's links on one level: [count, id, id, ...] with room for max_links(level) ids.
  const uint32_t* block(uint32_t id, int level) const {
    return level == 0 ? links0_.at(id) : upper_[id].data() + static_cast<size_t>(level - 1) * (1 + p_.m);
  }
  uint32_t* block(uint32_t id, int level) { return const_cast<uint32_t*>(std::as_const(*this).block(id, level)); }
  float dist(const uint8_t* q, uint32_t id) const { return dist_(q, vector(id), p_.dim); }
  void prefetch(uint32_t id) const;
  uint32_t new_slot(int level);
  void move_node(uint32_t from, uint32_t to);
  void drop_last_slot();
  uint32_t greedy(const uint8_t* q, uint32_t ep, int from_level, int to_level) const;
  // Beam search on one level; returns up to ef (distance, id) pairs, unordered. With `budget`, each
  // distance takes one from *budget and the search stops expanding at 0, keeping the best found so far.
  // `stopped`, when given, is set when the budget ran out.
  std::vector<Pair> search_level(const uint8_t* q, uint32_t ep, size_t ef, int level, size_t* budget = nullptr,
                                 bool* stopped = nullptr) const;
  // HNSW neighbour-selection heuristic: keeps a candidate only when it is closer to the base than to
  // every candidate already kept. `cands` must be sorted by distance to the base. With `budget` spent,
  // the remaining slots go to the nearest candidates left, without the pairwise checks.
  std::vector<uint32_t> select(const std::vector<Pair>& cands, size_t max, size_t* budget = nullptr) const;
  void set_links(uint32_t id, int level, const std::vector<uint32_t>& links);
  // Removal: a removed node's neighbours are reconnected through at most kReconnectPool of its
  // out-links, and one removal spends at most distance_budget() distances on it per level, so that its
  // cost is bounded whatever M and the dimension are.
  static constexpr size_t kReconnectPool = 32;
  static constexpr size_t kReconnectBytes = size_t{24} << 20;  // vector bytes compared per level
  size_t distance_budget() const { return kReconnectBytes / (vec_bytes_ + 64); }
  std::vector<uint32_t> reconnection_pool(uint32_t id, int level) const;
  void reconnect(uint32_t id, int level, const std::vector<uint32_t>& pointing, const std::vector<uint32_t>& pool);
  // Links from → to; when `from` is full, prunes its links with select() and appends the targets it
  // dropped (possibly `to`) to `dropped`.
  // With `budget` too small to measure from's links, `to` replaces a link to a node that keeps another
  // incoming link (none: `to` is not linked), without distances.
  void add_link(uint32_t from, uint32_t to, int level, std::vector<uint32_t>* dropped = nullptr,
                size_t* budget = nullptr);
  // Insertion: one insert compares at most insert_distance_budget() vectors (kInsertBytes of vector data)
  // in its candidate searches, neighbour selection and reverse-link pruning, so that its cost is bounded
  // whatever the dimension; small vectors never reach it.
  static constexpr size_t kInsertBytes = size_t{32} << 20;
  size_t insert_distance_budget() const { return kInsertBytes / (vec_bytes_ + 64); }
  // Pruning can leave a node, or a small group of nodes, that no link leads to from the rest: no search
  // reaches them. `at_risk[level]` lists the nodes an insert or a removal cut links to; each one found
  // cut off (but the entry point and `skip`, the node being removed) gets a link again (relink()).
  void repair(const std::vector<std::vector<uint32_t>>& at_risk, uint32_t skip);
  // The nodes that lead to `x` on `level` when none of them is reachable (x cut off, with the nodes
  // that lead only to it); empty when x is reachable or the walk back is too long to tell.
  std::vector<uint32_t> unreached_ancestors(uint32_t x, int level) const;
  // Gives `x` an incoming link on `level` from a reachable node near it; a node that loses a link for
  // it is appended to `orphans` to be checked. Distances are taken from *budget (repair() gives each
  // insert or removal one insert's budget), so a repair's cost is bounded whatever the dimension.
  void relink(uint32_t x, int level, std::vector<uint32_t>* orphans, size_t* budget);

  Params p_;
  DistanceFn dist_;
  size_t vec_bytes_;                                // encoded_size(quant, dim)
  size_t stride_;                                   // vec_bytes_ rounded up to 4 (F32 alignment)
  // Per slot, in chunks or deques: a growing set never moves all its nodes at once (slot_chunks.h).
  SlotChunks<uint8_t> vecs_;                        // stride_ bytes a slot
  SlotChunks<uint32_t> links0_;                     // 1 + 2m a slot
  std::deque<std::vector<uint32_t>> upper_;         // per slot: levels 1..L, (1 + m) each
  std::deque<std::vector<std::vector<uint32_t>>> in_;  // per slot, per level: nodes linking here
  std::deque<int8_t> levels_;                       // per slot; -1 = not restored yet
  size_t count_ = 0;
  uint64_t version_ = 0;
  uint32_t entry_ = 0;
  int max_level_ = -1;
};

}  // namespace infer::vector
