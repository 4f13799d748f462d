#include "vector/serialize.h"

#include <cstring>

namespace infer::vector {

namespace {

constexpr uint32_t kMagic = 0x53564649;  // "IFVS" little-endian

class Writer {
 public:
  template <class T>
  void put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void str(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::string_view in, const char* what) : in_(in), what_(what) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  const uint8_t* bytes(size_t n) {
    need(n);
    const auto* p = reinterpret_cast<const uint8_t*>(in_.data() + pos_);
    pos_ += n;
    return p;
  }
  std::string str() {
    const uint32_t n = get<uint32_t>();
    return std::string(reinterpret_cast<const char*>(bytes(n)), n);
  }
  size_t remaining() const { return in_.size() - pos_; }
  void done() const {
    if (pos_ != in_.size()) throw VectorSetError(std::string(what_) + ": trailing bytes");
  }

 private:
  void need(size_t n) const {
    if (n > in_.size() - pos_) throw VectorSetError(std::string(what_) + ": truncated");
  }
  std::string_view in_;
  size_t pos_ = 0;
  const char* what_;
};

}  // namespace

uint64_t record_count(const VectorSet& set) { return 1 + (set.projection().empty() ? 0 : 1) + set.size(); }

uint64_t save_records(const VectorSet& set, const std::function<void(std::string_view)>& emit) {
  const Hnsw& g = set.index();
  const SetConfig& c = set.config();
  // Ids are renumbered densely (removals leave holes), so a loader never allocates more than it reads.
  std::vector<uint32_t> dense(g.slots(), 0);
  uint32_t n = 0;
  for (uint32_t id = 0; id < g.slots(); ++id)
    if (g.contains(id)) dense[id] = n++;
  Writer h;
  h.put<uint32_t>(kMagic);
  h.put<uint32_t>(c.dim);
  h.put<uint8_t>(static_cast<uint8_t>(c.quant));
  h.put<uint32_t>(c.m);
  h.put<uint32_t>(c.ef_construction);
  h.put<uint64_t>(set.insert_counter());
  h.put<uint64_t>(set.size());
  h.put<int64_t>(g.entry_point() < 0 ? -1 : static_cast<int64_t>(dense[g.entry_point()]));
  h.put<uint32_t>(c.projection_input_dim);
  emit(h.out());
  uint64_t records = 1;
  if (c.projection_input_dim) {
    const auto& m = set.projection();
    emit(std::string_view(reinterpret_cast<const char*>(m.data()), m.size() * sizeof(float)));
    ++records;
  }
  const size_t vec_bytes = encoded_size(c.quant, c.dim);
  for (uint32_t id = 0; id < g.slots(); ++id) {
    const VectorSet::Element* e = set.element(id);
    if (!e) continue;
    Writer w;
    w.str(e->name);
    w.str(e->attrs);
    w.put<float>(e->norm);
    w.bytes(g.vector(id), vec_bytes);
    w.put<uint8_t>(static_cast<uint8_t>(g.level(id)));
    for (int lv = 0; lv <= g.level(id); ++lv) {
      const auto& links = g.links(id, lv);
      w.put<uint32_t>(static_cast<uint32_t>(links.size()));
      for (uint32_t t : links) w.put<uint32_t>(dense[t]);
    }
    emit(w.out());
    ++records;
  }
  return records;
}

std::unique_ptr<VectorSet> load_records(uint32_t version, const std::function<std::optional<std::string>()>& next,
                                        std::optional<uint64_t> records) {
  if (version < 1 || version > kEncodingVersion)
    throw VectorSetError("unknown vector set encoding version " + std::to_string(version));
  auto header = next();
  if (!header) throw VectorSetError("vector set header missing");
  Reader h(*header, "vector set header");
  if (h.get<uint32_t>() != kMagic) throw VectorSetError("vector set header: bad magic");
  SetConfig c;
  c.dim = h.get<uint32_t>();
  const auto quant = quant_from_byte(h.get<uint8_t>());
  if (!quant) throw VectorSetError("vector set header: unknown quantisation");
  c.quant = *quant;
  c.m = h.get<uint32_t>();
  c.ef_construction = h.get<uint32_t>();
  const uint64_t counter = h.get<uint64_t>();
  const uint64_t count = h.get<uint64_t>();
  const int64_t entry = h.get<int64_t>();
  if (version >= 2) c.projection_input_dim = h.get<uint32_t>();
  h.done();
  if (count > UINT32_MAX) throw VectorSetError("vector set header: too many elements");
  const auto slots = static_cast<uint32_t>(count);  // saved ids are dense
  if ((count == 0) != (entry < 0) || entry >= static_cast<int64_t>(slots))
    throw VectorSetError("vector set header: bad entry point");
  if (records && *records != 1 + (c.projection_input_dim ? 1 : 0) + count)
    throw VectorSetError("vector set header: the element count does not match the record count");
  // Validates dim, M, EF, REDUCE; nothing is sized by the header's counts, only by the records read.
  auto set = VectorSet::for_restore(c);
  if (c.projection_input_dim) {
    auto rec = next();
    if (!rec) throw VectorSetError("vector set: REDUCE matrix record missing");
    if (rec->size() != size_t{c.projection_input_dim} * c.dim * sizeof(float))
      throw VectorSetError("vector set: REDUCE matrix record has the wrong size");
    std::vector<float> m(rec->size() / sizeof(float));
    std::memcpy(m.data(), rec->data(), rec->size());
    set->restore_projection(std::move(m));
  }
  const size_t vec_bytes = encoded_size(c.quant, c.dim);
  for (uint32_t id = 0; id < slots; ++id) {
    auto rec = next();
    if (!rec) throw VectorSetError("vector set: element record missing");
    Reader r(*rec, "vector set element");
    VectorSet::Element e;
    e.name = r.str();
    e.attrs = r.str();
    e.norm = r.get<float>();
    if (!(e.norm >= 0 && e.norm <= kMaxVectorNorm)) throw VectorSetError("vector set element: bad norm");
    const uint8_t* vec = r.bytes(vec_bytes);
    if (!plausible_encoding(c.quant, vec, c.dim))
      throw VectorSetError("vector set element: the vector is not a unit vector in its encoding");
    const int level = r.get<uint8_t>();
    if (level > Hnsw::kMaxLevel) throw VectorSetError("vector set element: bad level");
    std::vector<std::vector<uint32_t>> links(static_cast<size_t>(level) + 1);
    for (size_t lv = 0; lv < links.size(); ++lv) {
      auto& l = links[lv];
      const uint32_t n = r.get<uint32_t>();
      if (n > (lv == 0 ? 2 * c.m : c.m)) throw VectorSetError("vector set element: too many links");
      if (size_t{n} * sizeof(uint32_t) > r.remaining()) throw VectorSetError("vector set element: truncated");
      l.resize(n);
      for (auto& t : l) {
        t = r.get<uint32_t>();
        if (t >= slots) throw VectorSetError("vector set element: link out of range");
      }
    }
    r.done();
    try {
      set->restore_element(id, std::move(e), level, vec, std::move(links));
    } catch (const std::runtime_error& ex) {
      throw VectorSetError(std::string("vector set element: ") + ex.what());
    }
  }
  set->finish_restore(entry < 0 ? 0 : static_cast<uint32_t>(entry), counter);
  return set;
}

std::string to_bytes(const VectorSet& set) {
  Writer w;
  w.put<uint32_t>(kEncodingVersion);
  save_records(set, [&](std::string_view rec) {
    w.put<uint32_t>(static_cast<uint32_t>(rec.size()));
    w.bytes(rec.data(), rec.size());
  });
  return std::move(w.out());
}

std::unique_ptr<VectorSet> from_bytes(std::string_view bytes) {
  Reader r(bytes, "vector set bytes");
  const uint32_t version = r.get<uint32_t>();
  size_t left = bytes.size() - 4;
  auto set = load_records(version, [&]() -> std::optional<std::string> {
    if (left == 0) return std::nullopt;
    const uint32_t n = r.get<uint32_t>();
    std::string rec(reinterpret_cast<const char*>(r.bytes(n)), n);
    left -= 4 + static_cast<size_t>(n);
    return rec;
  });
  r.done();
  return set;
}

}  // namespace infer::vector
