#include "vector/hnsw.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <stdexcept>
#include <string>

namespace infer::vector {

namespace {
constexpr int kMaxLevel = 16;

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void erase_one(std::vector<uint32_t>& v, uint32_t x) {
  auto it = std::find(v.begin(), v.end(), x);
  if (it != v.end()) {
    *it = v.back();
    v.pop_back();
  }
}
}  // namespace

Hnsw::Hnsw(const Params& p) : p_(p) {
  if (p_.m < 2) throw std::invalid_argument("HNSW M must be at least 2");
  if (p_.dim == 0) throw std::invalid_argument("vector dimension must be at least 1");
}

int Hnsw::level_for_seed(uint64_t seed, uint32_t m) {
  // Level L with probability ~ M^-L: floor(-ln(u) / ln(M)), u uniform in (0, 1].
  const double u = (static_cast<double>(mix64(seed) >> 11) + 1.0) / 9007199254740992.0;
  const int level = static_cast<int>(std::floor(-std::log(u) / std::log(static_cast<double>(m))));
  return std::min(level, kMaxLevel);
}

void Hnsw::begin_visit() const {
  if (visited_.size() < nodes_.size()) visited_.resize(nodes_.size(), 0);
  if (++epoch_ == 0) {  // wrapped: clear stale marks
    std::fill(visited_.begin(), visited_.end(), 0);
    epoch_ = 1;
  }
}

uint32_t Hnsw::greedy(const uint8_t* q, uint32_t ep, int from_level, int to_level) const {
  float best = dist(q, ep);
  for (int lv = from_level; lv > to_level; --lv) {
    for (bool moved = true; moved;) {
      moved = false;
      for (uint32_t nb : nodes_[ep]->out[lv]) {
        const float d = dist(q, nb);
        if (d < best) {
          best = d;
          ep = nb;
          moved = true;
        }
      }
    }
  }
  return ep;
}

std::vector<Hnsw::Pair> Hnsw::search_level(const uint8_t* q, uint32_t ep, size_t ef, int level) const {
  begin_visit();
  std::priority_queue<Pair, std::vector<Pair>, std::greater<>> cand;  // closest first
  std::priority_queue<Pair> best;                                     // farthest first
  const float d0 = dist(q, ep);
  cand.emplace(d0, ep);
  best.emplace(d0, ep);
  visited_[ep] = epoch_;
  while (!cand.empty()) {
    const auto [d, c] = cand.top();
    if (d > best.top().first && best.size() >= ef) break;
    cand.pop();
    for (uint32_t nb : nodes_[c]->out[level]) {
      if (visited_[nb] == epoch_) continue;
      visited_[nb] = epoch_;
      const float dn = dist(q, nb);
      if (best.size() < ef || dn < best.top().first) {
        cand.emplace(dn, nb);
        best.emplace(dn, nb);
        if (best.size() > ef) best.pop();
      }
    }
  }
  std::vector<Pair> out;
  out.reserve(best.size());
  for (; !best.empty(); best.pop()) out.push_back(best.top());
  return out;
}

std::vector<uint32_t> Hnsw::select(const std::vector<Pair>& cands, size_t max) const {
  std::vector<uint32_t> kept;
  kept.reserve(max);
  for (const auto& [d, c] : cands) {
    if (kept.size() >= max) break;
    bool good = true;
    for (uint32_t k : kept)
      if (dist(c, k) < d) {
        good = false;
        break;
      }
    if (good) kept.push_back(c);
  }
  return kept;
}

void Hnsw::set_links(uint32_t id, int level, std::vector<uint32_t> links) {
  auto& out = nodes_[id]->out[level];
  for (uint32_t old : out)
    if (std::find(links.begin(), links.end(), old) == links.end()) erase_one(nodes_[old]->in[level], id);
  for (uint32_t nw : links)
    if (std::find(out.begin(), out.end(), nw) == out.end()) nodes_[nw]->in[level].push_back(id);
  out = std::move(links);
}

void Hnsw::add_link(uint32_t from, uint32_t to, int level) {
  auto& out = nodes_[from]->out[level];
  if (std::find(out.begin(), out.end(), to) != out.end()) return;
  if (out.size() < max_links(level)) {
    out.push_back(to);
    nodes_[to]->in[level].push_back(from);
    return;
  }
  // Full: choose again among the old links plus the new one.
  std::vector<Pair> cands;
  cands.reserve(out.size() + 1);
  for (uint32_t o : out) cands.emplace_back(dist(from, o), o);
  cands.emplace_back(dist(from, to), to);
  std::sort(cands.begin(), cands.end());
  set_links(from, level, select(cands, max_links(level)));
}

uint32_t Hnsw::insert(const uint8_t* encoded, uint64_t level_seed, uint32_t ef) {
  const int level = level_for_seed(level_seed, p_.m);
  auto node = std::make_unique<Node>();
  node->vec.assign(encoded, encoded + encoded_size(p_.quant, p_.dim));
  node->level = level;
  node->out.resize(level + 1);
  node->in.resize(level + 1);
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
    nodes_[id] = std::move(node);
  } else {
    id = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back(std::move(node));
  }
  ++count_;
  if (count_ == 1) {
    entry_ = id;
    max_level_ = level;
    return id;
  }
  const uint8_t* q = nodes_[id]->vec.data();
  uint32_t ep = greedy(q, entry_, max_level_, level);
  for (int lv = std::min(level, max_level_); lv >= 0; --lv) {
    auto cands = search_level(q, ep, ef ? ef : p_.ef_construction, lv);
    std::sort(cands.begin(), cands.end());
    if (cands.empty()) continue;
    ep = cands.front().second;
    auto chosen = select(cands, p_.m);
    set_links(id, lv, chosen);
    for (uint32_t nb : chosen) add_link(nb, id, lv);
  }
  if (level > max_level_) {
    max_level_ = level;
    entry_ = id;
  }
  return id;
}

void Hnsw::remove(uint32_t id) {
  if (!contains(id)) throw std::out_of_range("HNSW remove: no node " + std::to_string(id));
  Node& gone = *nodes_[id];
  for (int lv = 0; lv <= gone.level; ++lv) {
    const std::vector<uint32_t> pointing = gone.in[lv];
    const std::vector<uint32_t> onward = gone.out[lv];
    for (uint32_t p : pointing) {
      // Reconnect p through the removed node's neighbours, so nothing reachable only via it is lost.
      std::vector<uint32_t> merged;
      for (uint32_t x : nodes_[p]->out[lv])
        if (x != id) merged.push_back(x);
      for (uint32_t x : onward)
        if (x != p && std::find(merged.begin(), merged.end(), x) == merged.end()) merged.push_back(x);
      if (merged.size() > max_links(lv)) {
        std::vector<Pair> cands;
        cands.reserve(merged.size());
        for (uint32_t x : merged) cands.emplace_back(dist(p, x), x);
        std::sort(cands.begin(), cands.end());
        merged = select(cands, max_links(lv));
      }
      set_links(p, lv, std::move(merged));
    }
    set_links(id, lv, {});
  }
  nodes_[id].reset();
  free_.push_back(id);
  --count_;
  if (count_ == 0) {
    max_level_ = -1;
    entry_ = 0;
    nodes_.clear();  // all slots free: start afresh
    free_.clear();
    return;
  }
  if (entry_ == id) {
    // The new entry point is the highest remaining node; the scan only happens when the entry goes.
    max_level_ = -1;
    for (uint32_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i] && nodes_[i]->level > max_level_) {
        max_level_ = nodes_[i]->level;
        entry_ = i;
      }
  }
}

std::vector<Hnsw::Hit> Hnsw::search(const uint8_t* q, size_t k, size_t ef, const Predicate* accept,
                                    size_t filter_ef) const {
  std::vector<Hit> hits;
  if (count_ == 0 || k == 0) return hits;
  ef = std::max(ef, k);
  const uint32_t ep = greedy(q, entry_, max_level_, 0);
  if (!accept) {
    auto found = search_level(q, ep, ef, 0);
    std::sort(found.begin(), found.end());
    for (size_t i = 0; i < found.size() && i < k; ++i) hits.push_back({found[i].second, found[i].first});
    return hits;
  }
  // Filtered walk: `best` steers the beam over all nodes, `kept` collects accepted ones.
  begin_visit();
  std::priority_queue<Pair, std::vector<Pair>, std::greater<>> cand;
  std::priority_queue<Pair> best, kept;
  size_t inspected = 1;
  const float d0 = dist(q, ep);
  visited_[ep] = epoch_;
  cand.emplace(d0, ep);
  best.emplace(d0, ep);
  if ((*accept)(ep)) kept.emplace(d0, ep);
  while (!cand.empty()) {
    const auto [d, c] = cand.top();
    if (best.size() >= ef && d > best.top().first && kept.size() >= k) break;
    if (filter_ef && inspected >= filter_ef) break;
    cand.pop();
    for (uint32_t nb : nodes_[c]->out[0]) {
      if (visited_[nb] == epoch_) continue;
      visited_[nb] = epoch_;
      const float dn = dist(q, nb);
      ++inspected;
      if ((*accept)(nb)) {
        kept.emplace(dn, nb);
        if (kept.size() > k) kept.pop();
      }
      if (best.size() < ef || dn < best.top().first || kept.size() < k) {
        cand.emplace(dn, nb);
        best.emplace(dn, nb);
        if (best.size() > ef) best.pop();
      }
    }
  }
  for (; !kept.empty(); kept.pop()) hits.push_back({kept.top().second, kept.top().first});
  std::reverse(hits.begin(), hits.end());
  return hits;
}

std::vector<Hnsw::Hit> Hnsw::brute_force(const uint8_t* q, size_t k, const Predicate* accept) const {
  std::priority_queue<Pair> kept;
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i] || (accept && !(*accept)(i))) continue;
    const float d = dist(q, i);
    if (kept.size() < k || d < kept.top().first) {
      kept.emplace(d, i);
      if (kept.size() > k) kept.pop();
    }
  }
  std::vector<Hit> hits;
  for (; !kept.empty(); kept.pop()) hits.push_back({kept.top().second, kept.top().first});
  std::reverse(hits.begin(), hits.end());
  return hits;
}

size_t Hnsw::memory_bytes() const {
  size_t bytes = sizeof(*this) + nodes_.capacity() * sizeof(nodes_[0]) + visited_.capacity() * 4;
  for (const auto& n : nodes_) {
    if (!n) continue;
    bytes += sizeof(Node) + n->vec.capacity();
    for (int lv = 0; lv <= n->level; ++lv)
      bytes += 2 * sizeof(std::vector<uint32_t>) + 4 * (n->out[lv].capacity() + n->in[lv].capacity());
  }
  return bytes;
}

void Hnsw::restore_node(uint32_t id, int level, const uint8_t* encoded, std::vector<std::vector<uint32_t>> out) {
  if (level < 0 || level > kMaxLevel) throw std::runtime_error("node " + std::to_string(id) + ": bad level");
  if (out.size() != static_cast<size_t>(level) + 1)
    throw std::runtime_error("node " + std::to_string(id) + ": link levels do not match its level");
  if (id >= nodes_.size()) nodes_.resize(static_cast<size_t>(id) + 1);
  if (nodes_[id]) throw std::runtime_error("node " + std::to_string(id) + " appears twice");
  auto node = std::make_unique<Node>();
  node->vec.assign(encoded, encoded + encoded_size(p_.quant, p_.dim));
  node->level = level;
  node->out = std::move(out);
  node->in.resize(level + 1);
  nodes_[id] = std::move(node);
  ++count_;
}

void Hnsw::finish_restore(uint32_t entry) {
  max_level_ = -1;
  free_.clear();
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]) {
      free_.push_back(i);
      continue;
    }
    max_level_ = std::max(max_level_, nodes_[i]->level);
    for (int lv = 0; lv <= nodes_[i]->level; ++lv) {
      if (nodes_[i]->out[lv].size() > max_links(lv))
        throw std::runtime_error("node " + std::to_string(i) + ": too many links");
      for (uint32_t t : nodes_[i]->out[lv]) {
        if (t >= nodes_.size() || !nodes_[t] || nodes_[t]->level < lv || t == i)
          throw std::runtime_error("node " + std::to_string(i) + ": link to missing node " + std::to_string(t));
        nodes_[t]->in[lv].push_back(i);
      }
    }
  }
  std::reverse(free_.begin(), free_.end());  // reuse low slots first
  if (count_ == 0) return;
  if (!contains(entry) || nodes_[entry]->level != max_level_) throw std::runtime_error("bad HNSW entry point");
  entry_ = entry;
}

}  // namespace infer::vector
