#include "vector/vector_set.h"

#include <unordered_set>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "vector/projection.h"

namespace infer::vector {

namespace {
const std::string kNoAttrs;

Hnsw::Params index_params(const SetConfig& c) {
  if (c.dim == 0 || c.dim > 65536) throw VectorSetError("vector dimension must be in 1..65536");
  if (c.projection_input_dim && (c.projection_input_dim > 65536 || c.dim > c.projection_input_dim))
    throw VectorSetError("REDUCE dimension must not exceed the vector dimension (at most 65536)");
  if (uint64_t{c.projection_input_dim} * c.dim > (uint64_t{1} << 24))
    throw VectorSetError("REDUCE matrix too large: input dimension × REDUCE dimension must be at most 16777216");
  if (c.m < 4 || c.m > 4096) throw VectorSetError("M must be in 4..4096");
  if (c.ef_construction < 1 || c.ef_construction > 1000000) throw VectorSetError("EF must be in 1..1000000");
  return Hnsw::Params{c.quant, c.dim, c.m, c.ef_construction};
}
}  // namespace

VectorSet::VectorSet(const SetConfig& cfg) : VectorSet(cfg, true) {}

VectorSet::VectorSet(const SetConfig& cfg, bool make_projection_now) : cfg_(cfg), index_(index_params(cfg)) {
  if (cfg_.projection_input_dim && make_projection_now)
    projection_ = make_projection(cfg_.projection_input_dim, cfg_.dim);
}

std::unique_ptr<VectorSet> VectorSet::for_restore(const SetConfig& cfg) {
  return std::unique_ptr<VectorSet>(new VectorSet(cfg, false));
}

void VectorSet::restore_projection(std::vector<float> m) {
  if (!cfg_.projection_input_dim || m.size() != size_t{cfg_.projection_input_dim} * cfg_.dim)
    throw VectorSetError("REDUCE matrix does not match the set's dimensions");
  for (float x : m)
    if (!std::isfinite(x)) throw VectorSetError("REDUCE matrix has a non-finite entry");
  projection_ = std::move(m);
}

double VectorSet::prepare(const std::vector<float>& v, bool projected, std::vector<uint8_t>* encoded) const {
  const uint32_t want = projected ? cfg_.dim : input_dim();
  if (v.size() != want) {
    // Redis 8's wording, which clients match.
    if (cfg_.projection_input_dim && !projected)
      throw VectorSetError("Input dimension mismatch for projection - got " + std::to_string(v.size()) +
                           " but projection expects " + std::to_string(want) + " (the set reduces them to " +
                           std::to_string(cfg_.dim) + ")");
    throw VectorSetError("Vector dimension mismatch - got " + std::to_string(v.size()) + " but set has " +
                         std::to_string(want));
  }
  for (float x : v)
    if (!std::isfinite(x)) throw VectorSetError("vector components must be finite");
  std::vector<float> unit(cfg_.dim);
  if (cfg_.projection_input_dim && !projected)
    project(projection_, cfg_.projection_input_dim, cfg_.dim, v.data(), unit.data());
  else
    unit = v;
  const double norm = normalize(unit.data(), unit.size());
  encoded->resize(encoded_size(cfg_.quant, cfg_.dim));
  encode(cfg_.quant, unit.data(), unit.size(), encoded->data());
  return norm;
}

namespace {
// A query may be that large (only its direction counts), a stored vector keeps its norm as a float.
void check_norm(double norm) {
  if (norm > kMaxVectorNorm) throw VectorSetError("vector too large: its L2 norm must be at most 1e38");
}
}  // namespace

void VectorSet::insert_new(const std::string& name, const uint8_t* encoded, double norm, const std::string& attrs,
                           uint32_t ef, const Hnsw::PreparedInsert* prepared) {
  const uint32_t id = index_.insert(encoded, inserts_++, ef, prepared);
  if (id >= elems_.size()) elems_.resize(static_cast<size_t>(id) + 1);
  Element& e = elems_[id];
  e.name = name;
  e.norm = static_cast<float>(norm);
  e.attrs = attrs;
  if (!e.attrs.empty()) ++n_attrs_;
  attr_bytes_ += e.attrs.size();
  ids_.set(name, id);
  names_.insert(name);
}

bool VectorSet::add(std::string_view name, const std::vector<float>& v, const std::optional<std::string>& attrs,
                    uint32_t ef, bool projected) {
  std::vector<uint8_t> enc;
  const double norm = prepare(v, projected, &enc);
  check_norm(norm);
  std::string old_attrs;
  const std::string key(name);
  const std::optional<uint32_t> old_id = ids_.get(key);
  const bool existed = old_id.has_value();
  if (existed) {
    old_attrs = elems_[*old_id].attrs;
    remove(name);
  }
  insert_new(key, enc.data(), norm, attrs ? *attrs : old_attrs, ef, nullptr);
  return !existed;
}

VectorSet::PreparedAdd VectorSet::prepare_add(const std::vector<float>& v, uint32_t ef) const {
  PreparedAdd p;
  p.norm = prepare(v, false, &p.encoded);
  check_norm(p.norm);
  p.graph = index_.prepare_insert(p.encoded.data(), inserts_, ef);
  return p;
}

bool VectorSet::add_prepared(std::string_view name, const PreparedAdd& p, const std::optional<std::string>& attrs,
                             uint32_t ef) {
  if (contains(name)) return false;
  insert_new(std::string(name), p.encoded.data(), p.norm, attrs.value_or(std::string()), ef, &p.graph);
  return true;
}

bool VectorSet::remove(std::string_view name) {
  const std::optional<uint32_t> found = ids_.get(name);
  if (!found) return false;
  const uint32_t id = *found;
  if (!elems_[id].attrs.empty()) --n_attrs_;
  attr_bytes_ -= elems_[id].attrs.size();
  ids_.erase(name);
  names_.erase(names_.find(name));
  // The index moves its last node into the freed id; the element follows it.
  if (const auto moved = index_.remove(id)) {
    elems_[id] = std::move(elems_[*moved]);
    ids_.set(elems_[id].name, id);
  }
  elems_.resize(index_.slots());
  return true;
}

std::optional<std::vector<float>> VectorSet::embedding(std::string_view name) const {
  const std::optional<uint32_t> found = ids_.get(name);
  if (!found) return std::nullopt;
  std::vector<float> out(cfg_.dim);
  decode(cfg_.quant, index_.vector(*found), cfg_.dim, out.data());
  const float norm = elems_[*found].norm;
  for (float& x : out) x *= norm;
  return out;
}

std::optional<RawVector> VectorSet::raw(std::string_view name) const {
  const std::optional<uint32_t> found = ids_.get(name);
  if (!found) return std::nullopt;
  const uint8_t* p = index_.vector(*found);
  RawVector r{cfg_.quant, std::string(reinterpret_cast<const char*>(p), encoded_size(cfg_.quant, cfg_.dim)),
              elems_[*found].norm, 0.0f};
  if (cfg_.quant == Quant::Q8) {
    float scale;
    std::memcpy(&scale, p, 4);
    r.range = scale * 127.0f;
    r.bytes.erase(0, 4);  // the int8 components; the scale travels as `range`
  }
  return r;
}

std::optional<std::string> VectorSet::attributes(std::string_view name) const {
  const std::optional<uint32_t> found = ids_.get(name);
  if (!found) return std::nullopt;
  return elems_[*found].attrs;
}

bool VectorSet::set_attributes(std::string_view name, const std::string& json) {
  const std::optional<uint32_t> found = ids_.get(name);
  if (!found) return false;
  Element& e = elems_[*found];
  n_attrs_ += (json.empty() ? 0 : 1);
  n_attrs_ -= (e.attrs.empty() ? 0 : 1);
  attr_bytes_ += json.size();
  attr_bytes_ -= e.attrs.size();
  e.attrs = json;
  return true;
}

uint64_t VectorSet::estimated_filter_work(const SearchOptions& opt) const {
  if (!opt.filter || size() == 0) return 0;
  const uint64_t inspected = opt.truth ? size() : std::min<uint64_t>(size(), opt.filter_ef ? opt.filter_ef : opt.count * 100);
  const uint64_t per_element = opt.filter->estimate_units(attr_bytes_ / size());
  return per_element > UINT64_MAX / inspected ? UINT64_MAX : per_element * inspected;
}

std::vector<const std::string*> VectorSet::random_names(size_t count, bool repeat, std::mt19937_64& rng) const {
  // Ids are dense (0 .. size()-1): a removal moves the last node into the freed slot.
  const size_t n = size();
  std::vector<const std::string*> out;
  if (n == 0) return out;
  if (repeat) {
    out.reserve(count);
    for (size_t i = 0; i < count; ++i) out.push_back(&elems_[rng() % n].name);
    return out;
  }
  count = std::min(count, n);
  out.reserve(count);
  if (count * 2 >= n) {  // most of the set: a partial shuffle of every id
    std::vector<uint32_t> ids(n);
    for (uint32_t i = 0; i < n; ++i) ids[i] = i;
    for (size_t i = 0; i < count; ++i) {
      std::swap(ids[i], ids[i + rng() % (n - i)]);
      out.push_back(&elems_[ids[i]].name);
    }
    return out;
  }
  std::unordered_set<uint32_t> seen;
  while (out.size() < count) {
    const uint32_t id = static_cast<uint32_t>(rng() % n);
    if (seen.insert(id).second) out.push_back(&elems_[id].name);
  }
  return out;
}

std::vector<const std::string*> VectorSet::range(const RangeBound& start, const RangeBound& end, size_t count) const {
  std::vector<const std::string*> out;
  auto it = start.kind == RangeBound::Min   ? names_.begin()
            : start.kind == RangeBound::Max ? names_.end()
            : start.inclusive               ? names_.lower_bound(start.name)
                                            : names_.upper_bound(start.name);
  for (; it != names_.end() && out.size() < count; ++it) {
    if (end.kind == RangeBound::Min) break;
    if (end.kind == RangeBound::Name && (end.inclusive ? *it > end.name : *it >= end.name)) break;
    out.push_back(&*it);
  }
  return out;
}

std::optional<std::vector<std::vector<std::pair<const std::string*, float>>>> VectorSet::neighbours(
    std::string_view name, bool with_scores) const {
  const std::optional<uint32_t> found = ids_.get(name);
  if (!found) return std::nullopt;
  const uint32_t id = *found;
  std::vector<std::vector<std::pair<const std::string*, float>>> out(static_cast<size_t>(index_.level(id)) + 1);
  for (int level = 0; level <= index_.level(id); ++level)
    for (uint32_t other : index_.links(id, level))
      out[level].emplace_back(&elems_[other].name,
                              with_scores ? std::clamp(1.0f - index_.distance(id, other) / 2.0f, 0.0f, 1.0f) : 0.0f);
  return out;
}

std::string main_thread_search_error(uint64_t search_bytes) {
  return "search would compare about " + std::to_string(search_bytes >> 20) + " MiB of vectors, more than the " +
         std::to_string(kMainThreadSearchBytes >> 20) + " MiB a search may on Redis's main thread";
}

uint64_t VectorSet::estimated_search_bytes(const SearchOptions& opt) const {
  const uint64_t n = size();
  const uint64_t vec_bytes = encoded_size(cfg_.quant, cfg_.dim);
  if (opt.truth) return n * vec_bytes;
  uint64_t kept = std::max(opt.ef, opt.count);
  if (opt.filter) kept = std::max<uint64_t>(kept, opt.filter_ef ? opt.filter_ef : opt.count * 100);
  const uint64_t links = 2 * uint64_t{cfg_.m};
  const uint64_t compared = kept > n / links ? n : kept * links;
  return compared * vec_bytes;
}

std::vector<SearchHit> VectorSet::run_search(const uint8_t* q, const SearchOptions& opt) const {
  std::vector<Hnsw::Hit> hits;
  FilterBudget budget(opt.filter_work_limit);
  Hnsw::Predicate accept;
  if (opt.filter)
    accept = [&](uint32_t id) { return opt.filter->matches(elems_[id].attrs, &budget); };
  else if (opt.accept)
    accept = [&](uint32_t id) { return (*opt.accept)(elems_[id].name, elems_[id].attrs); };
  const Hnsw::Predicate* pred = accept ? &accept : nullptr;
  try {
    if (opt.truth) {
      hits = index_.brute_force(q, opt.count, pred);
    } else {
      const size_t filter_ef = opt.filter_ef ? opt.filter_ef : opt.count * 100;
      hits = index_.search(q, opt.count, std::max(opt.ef, opt.count), pred, filter_ef);
    }
  } catch (const FilterLimitError& e) {
    throw FilterWorkError(std::string(e.what()) + "; lower COUNT, FILTER-EF or the operands' size");
  }
  std::vector<SearchHit> out;
  out.reserve(hits.size());
  for (const auto& h : hits) {
    const float score = std::clamp(1.0f - h.distance / 2.0f, 0.0f, 1.0f);
    if (opt.epsilon && score < 1.0f - *opt.epsilon) continue;
    out.push_back({&elems_[h.id].name, score, &elems_[h.id].attrs});
  }
  return out;
}

std::vector<SearchHit> VectorSet::search(const std::vector<float>& query, const SearchOptions& opt) const {
  std::vector<uint8_t> enc;
  prepare(query, false, &enc);
  return run_search(enc.data(), opt);
}

std::vector<SearchHit> VectorSet::search_element(std::string_view name, const SearchOptions& opt) const {
  const std::optional<uint32_t> found = ids_.get(name);
  if (!found) throw VectorSetError("element not found in set");
  return run_search(index_.vector(*found), opt);
}

void VectorSet::for_each(
    const std::function<void(const std::string&, const std::vector<float>&, const std::string&)>& fn) const {
  std::vector<float> v(cfg_.dim);
  for (uint32_t id = 0; id < index_.slots(); ++id) {
    if (!index_.contains(id)) continue;
    decode(cfg_.quant, index_.vector(id), cfg_.dim, v.data());
    for (float& x : v) x *= elems_[id].norm;
    fn(elems_[id].name, v, elems_[id].attrs);
  }
}

size_t VectorSet::memory_bytes() const {
  size_t bytes = sizeof(*this) + index_.memory_bytes() + elems_.size() * sizeof(Element);
  for (const auto& e : elems_) bytes += e.name.capacity() + e.attrs.capacity();
  bytes += ids_.memory_bytes();
  bytes += projection_.capacity() * sizeof(float);
  // Ordered names (VRANGE): one tree node per element.
  for (const auto& n : names_) bytes += sizeof(std::string) + 32 + n.capacity();
  return bytes;
}

void VectorSet::restore_element(uint32_t id, Element e, int level, const uint8_t* encoded,
                                std::vector<std::vector<uint32_t>> links) {
  if (ids_.contains(e.name)) throw VectorSetError("duplicate element name in saved set");
  index_.restore_node(id, level, encoded, std::move(links));
  if (id >= elems_.size()) elems_.resize(static_cast<size_t>(id) + 1);
  if (!e.attrs.empty()) ++n_attrs_;
  attr_bytes_ += e.attrs.size();
  ids_.set(e.name, id);
  names_.insert(e.name);
  elems_[id] = std::move(e);
}

void VectorSet::finish_restore(uint32_t entry, uint64_t insert_counter) {
  if (cfg_.projection_input_dim && projection_.empty()) throw VectorSetError("REDUCE matrix missing");
  try {
    index_.finish_restore(entry);
  } catch (const std::runtime_error& e) {
    throw VectorSetError(std::string("corrupt vector set graph: ") + e.what());
  }
  elems_.resize(index_.slots());
  inserts_ = insert_counter;
}

}  // namespace infer::vector
