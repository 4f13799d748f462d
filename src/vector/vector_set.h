// A vector set: named elements, each with a vector (L2-normalised, stored quantised, its norm kept) and
// optional JSON attributes, indexed by an HNSW graph for cosine-similarity search. The value behind one
// INFER.V* key; it knows nothing of Redis.
//
// Thread-safety: none; the module calls it on Redis's main thread only.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vector/filter.h"
#include "vector/id_map.h"
#include "vector/hnsw.h"
#include "vector/quant.h"

namespace infer::vector {

// A request that does not fit the set (dimension, quantisation or M mismatch, bad JSON ...).
struct VectorSetError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A search's filter work went past SearchOptions::filter_work_limit.
struct FilterWorkError : VectorSetError {
  using VectorSetError::VectorSetError;
};

struct SetConfig {
  uint32_t dim = 0;                    // stored dimension (the reduced one with REDUCE)
  uint32_t projection_input_dim = 0;   // REDUCE: vectors arrive at this size and are projected to dim; 0 = none
  Quant quant = Quant::Q8;
  uint32_t m = 16;
  uint32_t ef_construction = 200;
};

// Filter work (filter.h units) a search may use unless the caller allows more: about 4 ms of one core,
// what a search on Redis's main thread may take.
inline constexpr uint64_t kFilterWorkLimit = 8'000'000;

// Vector bytes a search may be expected to compare on Redis's main thread: the budget of one insert
// (Hnsw::kInsertBytes), a few milliseconds. Costlier searches run on the search threads, and are refused
// where they cannot (MULTI, scripts, NOTHREAD).
inline constexpr uint64_t kMainThreadSearchBytes = uint64_t{32} << 20;
// "search would compare about N MiB of vectors, more than the 32 MiB ..." for a search past it.
std::string main_thread_search_error(uint64_t search_bytes);

struct SearchOptions {
  size_t count = 10;
  size_t ef = 100;                  // raised to count
  const Filter* filter = nullptr;
  size_t filter_ef = 0;             // candidates inspected with a filter; 0 → count × 100
  uint64_t filter_work_limit = kFilterWorkLimit;  // past it the search throws FilterWorkError
  bool truth = false;               // exact linear scan instead of the graph
  std::optional<float> epsilon;     // keep only scores >= 1 - epsilon
  // Without a filter: the caller's own test of an element (name, attributes), inspected like a FILTER's
  // candidates (filter_ef); it must be cheap, as no work limit applies to it.
  const std::function<bool(const std::string& name, const std::string& attrs)>* accept = nullptr;
};

struct SearchHit {
  const std::string* name;          // valid until the set changes
  float score;                      // 1 - (1 - cos)/2, in [0, 1]; 1 = same direction
  const std::string* attrs;         // empty string when none
};

struct RawVector {
  Quant quant;
  std::string bytes;                // the encoded vector as stored
  float norm;                       // L2 norm of the vector as added
  float range;                      // Q8: max |component| of the unit vector; 0 otherwise
};

class VectorSet {
 public:
  explicit VectorSet(const SetConfig& cfg);
  // An empty set for serialize.cpp to fill: with REDUCE, its matrix comes from restore_projection(),
  // not generated here (a forged header must not cost a 64 MiB matrix before its record is read).
  static std::unique_ptr<VectorSet> for_restore(const SetConfig& cfg);

  const SetConfig& config() const { return cfg_; }
  // Size of the vectors add() and search() take: projection_input_dim with REDUCE, else dim.
  uint32_t input_dim() const { return cfg_.projection_input_dim ? cfg_.projection_input_dim : cfg_.dim; }
  // The REDUCE matrix (projection.h), dim × projection_input_dim; empty without REDUCE.
  const std::vector<float>& projection() const { return projection_; }
  size_t size() const { return index_.size(); }
  size_t attributes_count() const { return n_attrs_; }
  int max_level() const { return index_.max_level(); }
  uint32_t max_node_id() const { return index_.slots(); }
  bool contains(std::string_view name) const { return ids_.contains(name); }
  size_t memory_bytes() const;

  // Adds `name` with vector `v` (input_dim() floats, projected with REDUCE). Re-adding a name replaces its
  // vector (remove and insert again) and returns false. `attrs`: nullopt keeps the old attributes, ""
  // removes them, otherwise valid JSON. `ef`: build beam width for this insert (0: the set's).
  // `projected`: `v` is already reduced (config().dim floats; AOF rewrite of a REDUCE set). Throws
  // VectorSetError (wrong dimension, non-finite component, L2 norm above kMaxVectorNorm, bad JSON) before
  // changing anything.
  bool add(std::string_view name, const std::vector<float>& v, const std::optional<std::string>& attrs = std::nullopt,
           uint32_t ef = 0, bool projected = false);
  // VADD ... CAS: the new element's encoding and neighbour searches, done ahead (a const member: on a
  // search thread under the set's read lock). Throws as add() does.
  struct PreparedAdd {
    std::vector<uint8_t> encoded;
    double norm = 0;
    Hnsw::PreparedInsert graph;
  };
  PreparedAdd prepare_add(const std::vector<float>& v, uint32_t ef = 0) const;
  // Adds a new element from prepare_add(): the graph is what add() would build now (searches that the
  // changes since make stale are done again). Returns false, changing nothing, when `name` exists.
  bool add_prepared(std::string_view name, const PreparedAdd& p, const std::optional<std::string>& attrs,
                    uint32_t ef = 0);
  // Returns false when the element is not there. Memory and graph links really go.
  bool remove(std::string_view name);

  // De-quantised vector scaled back by its stored norm; nullopt when absent.
  std::optional<std::vector<float>> embedding(std::string_view name) const;
  std::optional<RawVector> raw(std::string_view name) const;
  // nullopt when the element is absent; "" when it has no attributes.
  std::optional<std::string> attributes(std::string_view name) const;
  // Returns false when absent; "" removes. Any text is kept, as Redis 8 keeps it: FILTER reads JSON
  // objects and never matches an element whose attributes are not one.
  bool set_attributes(std::string_view name, const std::string& json);

  // One end of a VRANGE: `-` (Min), `+` (Max), or a name, inclusive (`[name`) or not (`(name`).
  struct RangeBound {
    enum Kind { Min, Max, Name } kind = Min;
    std::string name;
    bool inclusive = true;
  };
  // VRANGE: up to `count` element names from `start` to `end` in byte order (memcmp, as Redis 8 orders
  // them). Valid until the set changes.
  std::vector<const std::string*> range(const RangeBound& start, const RangeBound& end, size_t count) const;
  // VRANDMEMBER: `count` element names drawn at random with `rng`, all different (at most size()) unless
  // `repeat`. Valid until the set changes.
  std::vector<const std::string*> random_names(size_t count, bool repeat, std::mt19937_64& rng) const;
  // VLINKS: the element's graph neighbours on each of its levels (index = level, 0 first), each with its
  // similarity score as VSIM gives it (0 without `with_scores`, which compares no vectors); nullopt when
  // the element is absent. Valid until the set changes.
  std::optional<std::vector<std::vector<std::pair<const std::string*, float>>>> neighbours(
      std::string_view name, bool with_scores = true) const;

  // Filter work units a search with these options is expected to take (0 without a filter): the
  // elements it may inspect times the filter's estimate for an element of the mean attribute size.
  uint64_t estimated_filter_work(const SearchOptions& opt) const;
  // Vector bytes the search is expected to compare: every element with TRUTH, else the candidates it
  // keeps (EF, or FILTER-EF with a filter) times the layer-0 links each one brings. An upper estimate
  // for choosing where a search runs, not a bound the search enforces.
  uint64_t estimated_search_bytes(const SearchOptions& opt) const;

  // Nearest elements to a query vector (input_dim() floats; throws VectorSetError otherwise) or to
  // an element already in the set (throws when absent). Closest first. Throws FilterWorkError when the
  // filter's work passes opt.filter_work_limit.
  std::vector<SearchHit> search(const std::vector<float>& query, const SearchOptions& opt) const;
  std::vector<SearchHit> search_element(std::string_view name, const SearchOptions& opt) const;

  // Visits every element in id order: name, vector as embedding() gives it (reduced with REDUCE),
  // attributes ("" when none).
  void for_each(const std::function<void(const std::string&, const std::vector<float>&, const std::string&)>& fn) const;

  // For serialize.cpp: the whole state.
  struct Element {
    std::string name;
    std::string attrs;
    float norm = 0;
  };
  const Hnsw& index() const { return index_; }
  const Element* element(uint32_t id) const { return id < elems_.size() && index_.contains(id) ? &elems_[id] : nullptr; }
  uint64_t insert_counter() const { return inserts_; }
  // Restores one element exactly as saved (graph links included); then call finish_restore().
  void restore_element(uint32_t id, Element e, int level, const uint8_t* encoded, std::vector<std::vector<uint32_t>> links);
  void finish_restore(uint32_t entry, uint64_t insert_counter);
  // Restores the saved REDUCE matrix (dim × projection_input_dim finite floats; throws otherwise).
  // Before any element: finish_restore() refuses a REDUCE set without its matrix.
  void restore_projection(std::vector<float> m);

 private:
  std::vector<SearchHit> run_search(const uint8_t* encoded_query, const SearchOptions& opt) const;
  // Checks the size of an incoming vector, projects it (REDUCE), normalises and encodes it; returns the norm.
  double prepare(const std::vector<float>& v, bool projected, std::vector<uint8_t>* encoded) const;
  void insert_new(const std::string& name, const uint8_t* encoded, double norm, const std::string& attrs, uint32_t ef,
                  const Hnsw::PreparedInsert* prepared);
  VectorSet(const SetConfig& cfg, bool make_projection_now);

  SetConfig cfg_;
  std::vector<float> projection_;
  Hnsw index_;
  std::deque<Element> elems_;                       // by node id (a deque: growth moves no element)
  IdMap ids_;                                       // name → node id
  std::set<std::string, std::less<>> names_;       // the names in byte order (VRANGE)
  size_t n_attrs_ = 0;
  uint64_t attr_bytes_ = 0;                         // all elements' attributes, for the filter estimate
  uint64_t inserts_ = 0;                            // seeds node levels: same ops, same graph
};

}  // namespace infer::vector
