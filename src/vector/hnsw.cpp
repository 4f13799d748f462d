#include "vector/hnsw.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <stdexcept>
#include <string>


namespace infer::vector {

namespace {
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

// Visited marks by epoch, one array per thread: concurrent searches of one set (shared lock) never share
// it, and a new search is one increment instead of a clear. Sized to the largest set this thread saw.
struct Visited {
  std::vector<uint32_t> mark;
  uint32_t epoch = 0;

  void begin(size_t slots) {
    if (mark.size() < slots) mark.resize(slots, 0);
    if (++epoch == 0) {  // wrapped: clear stale marks
      std::fill(mark.begin(), mark.end(), 0);
      epoch = 1;
    }
  }
  // True when `id` was already seen in this search; marks it.
  bool seen(uint32_t id) {
    if (mark[id] == epoch) return true;
    mark[id] = epoch;
    return false;
  }
};
thread_local Visited t_visited;
thread_local Visited t_walk_back;  // unreached_ancestors(), which runs between searches of an insert
thread_local Visited t_link_marks;  // set_links() and remove(): membership of one link list at a time
// Nodes that repair() proved reachable (or, for the node a walk started from, took as reachable past the
// walk bound) on the level being repaired, so that later walks stop at them. Valid until a link is taken away: set_links() then
// clears them (a new epoch), since a removed link can cut a proven node off.
thread_local Visited t_reached;

using MinHeap = std::priority_queue<std::pair<float, uint32_t>, std::vector<std::pair<float, uint32_t>>, std::greater<>>;
using MaxHeap = std::priority_queue<std::pair<float, uint32_t>>;
}  // namespace

Hnsw::Hnsw(const Params& p)
    : p_(p),
      dist_(distance_fn(p.quant)),
      vec_bytes_(encoded_size(p.quant, p.dim)),
      stride_((vec_bytes_ + 3) & ~size_t{3}),
      vecs_(stride_),
      links0_(1 + 2 * size_t{p.m}) {
  if (p_.m < 2) throw std::invalid_argument("HNSW M must be at least 2");
  if (p_.dim == 0) throw std::invalid_argument("vector dimension must be at least 1");
}

int Hnsw::level_for_seed(uint64_t seed, uint32_t m) {
  // Level L with probability ~ M^-L: floor(-ln(u) / ln(M)), u uniform in (0, 1].
  const double u = (static_cast<double>(mix64(seed) >> 11) + 1.0) / 9007199254740992.0;
  const int level = static_cast<int>(std::floor(-std::log(u) / std::log(static_cast<double>(m))));
  return std::min(level, kMaxLevel);
}

void Hnsw::prefetch(uint32_t id) const {
  // The graph walk jumps between random slots: ask for the vector's cache lines before they are needed.
  const uint8_t* p = vector(id);
  for (size_t off = 0; off < vec_bytes_ && off < 512; off += 64) __builtin_prefetch(p + off);
}

uint32_t Hnsw::greedy(const uint8_t* q, uint32_t ep, int from_level, int to_level) const {
  float best = dist(q, ep);
  for (int lv = from_level; lv > to_level; --lv) {
    for (bool moved = true; moved;) {
      moved = false;
      for (uint32_t nb : links(ep, lv)) {
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

std::vector<Hnsw::Pair> Hnsw::search_level(const uint8_t* q, uint32_t ep, size_t ef, int level,
                                           size_t* budget, bool* stopped) const {
  if (stopped) *stopped = false;
  Visited& vis = t_visited;
  vis.begin(slots());
  std::vector<Pair> storage;
  storage.reserve(ef + 1);
  MaxHeap best(MaxHeap::value_compare(), std::move(storage));  // farthest of the ef best on top
  MinHeap cand;                                     // closest unexpanded on top
  std::vector<uint32_t> fresh;
  fresh.reserve(max_links(level));
  const float d0 = dist(q, ep);
  cand.emplace(d0, ep);
  best.emplace(d0, ep);
  vis.seen(ep);
  while (!cand.empty()) {
    const auto [d, c] = cand.top();
    if (d > best.top().first && best.size() >= ef) break;
    cand.pop();
    // The walk is bound by memory latency: fetch the next candidate's links and these neighbours'
    // visited marks while the current ones are read.
    if (!cand.empty()) __builtin_prefetch(block(cand.top().second, level));
    const auto nbs = links(c, level);
    for (uint32_t nb : nbs) __builtin_prefetch(&vis.mark[nb]);
    fresh.clear();
    for (uint32_t nb : nbs)
      if (!vis.seen(nb)) {
        prefetch(nb);
        fresh.push_back(nb);
      }
    if (budget) {
      if (*budget < fresh.size()) {  // out of budget: keep the best found so far
        if (stopped) *stopped = true;
        break;
      }
      *budget -= fresh.size();
    }
    for (uint32_t nb : fresh) {
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

std::vector<uint32_t> Hnsw::select(const std::vector<Pair>& cands, size_t max, size_t* budget) const {
  std::vector<uint32_t> kept;
  kept.reserve(max);
  size_t next = 0;  // first candidate not yet judged
  for (; next < cands.size() && kept.size() < max; ++next) {
    const auto& [d, c] = cands[next];
    if (budget) {
      if (*budget < kept.size()) break;  // cannot pay for this candidate's checks
      *budget -= kept.size();
    }
    bool good = true;
    for (uint32_t k : kept)
      if (dist(vector(c), k) < d) {
        good = false;
        break;
      }
    if (good) kept.push_back(c);
  }
  // Out of budget: the nearest candidates not judged fill the remaining slots.
  for (; next < cands.size() && kept.size() < max; ++next) kept.push_back(cands[next].second);
  return kept;
}

void Hnsw::set_links(uint32_t id, int level, const std::vector<uint32_t>& links) {
  // Linear in the two lists (marks, not searches): at a large M a list holds thousands of links.
  uint32_t* b = block(id, level);
  const std::span<const uint32_t> old(b + 1, b[0]);
  Visited& marks = t_link_marks;
  marks.begin(slots());
  for (uint32_t nw : links) marks.seen(nw);
  bool dropped = false;
  for (uint32_t o : old)
    if (marks.mark[o] != marks.epoch) {
      erase_one(in_[o][level], id);
      dropped = true;
    }
  marks.begin(slots());
  for (uint32_t o : old) marks.seen(o);
  for (uint32_t nw : links)
    if (marks.mark[nw] != marks.epoch) in_[nw][level].push_back(id);
  b[0] = static_cast<uint32_t>(links.size());
  std::copy(links.begin(), links.end(), b + 1);
  if (dropped) t_reached.begin(slots());  // a proven path may have used the link
}

void Hnsw::add_link(uint32_t from, uint32_t to, int level, std::vector<uint32_t>* dropped, size_t* budget) {
  uint32_t* b = block(from, level);
  const std::span<const uint32_t> out(b + 1, b[0]);
  if (std::find(out.begin(), out.end(), to) != out.end()) return;
  if (out.size() < max_links(level)) {
    b[1 + b[0]++] = to;
    in_[to][level].push_back(from);
    return;
  }
  if (budget) {
    const size_t measure = out.size() + 1;
    if (*budget < measure) {
      // Too wide to measure: `to` takes the place of the last link whose target another node links to.
      for (size_t i = out.size(); i-- > 0;)
        if (in_[out[i]][level].size() >= 2) {
          std::vector<uint32_t> next(out.begin(), out.end());
          const uint32_t gone = next[i];
          next[i] = to;
          set_links(from, level, next);
          if (dropped) dropped->push_back(gone);
          return;
        }
      if (dropped) dropped->push_back(to);
      return;
    }
    *budget -= measure;
  }
  // Full: choose again among the old links plus the new one.
  std::vector<Pair> cands;
  cands.reserve(out.size() + 1);
  const uint8_t* base = vector(from);
  for (uint32_t o : out) cands.emplace_back(dist(base, o), o);
  cands.emplace_back(dist(base, to), to);
  std::sort(cands.begin(), cands.end());
  const auto kept = select(cands, max_links(level), budget);
  if (dropped)
    for (const auto& [d, c] : cands)
      if (std::find(kept.begin(), kept.end(), c) == kept.end()) dropped->push_back(c);
  set_links(from, level, kept);
}

uint32_t Hnsw::new_slot(int level) {
  const uint32_t id = slots();
  vecs_.push_slot();
  links0_.push_slot();
  upper_.emplace_back();
  in_.emplace_back();
  levels_.push_back(-1);
  levels_[id] = static_cast<int8_t>(level);
  block(id, 0)[0] = 0;
  upper_[id].assign(static_cast<size_t>(level) * (1 + p_.m), 0);
  in_[id].assign(static_cast<size_t>(level) + 1, {});
  return id;
}

Hnsw::PreparedInsert Hnsw::prepare_insert(const uint8_t* q, uint64_t level_seed, uint32_t ef) const {
  PreparedInsert p;
  p.version = version_;
  p.level = level_for_seed(level_seed, p_.m);
  p.ef = ef;
  if (count_ == 0) return p;
  uint32_t ep = greedy(q, entry_, max_level_, p.level);
  // The most each level's search could get in insert(): what is left when selection and pruning spent nothing.
  size_t budget = insert_distance_budget();
  p.levels.resize(static_cast<size_t>(std::min(p.level, max_level_)) + 1);
  for (int lv = std::min(p.level, max_level_); lv >= 0; --lv) {
    auto& l = p.levels[lv];
    l.ep = ep;
    size_t search_budget = budget / 4 * 3;
    const size_t search_start = search_budget;
    l.cands = search_level(q, ep, ef ? ef : p_.ef_construction, lv, &search_budget, &l.stopped);
    l.spent = search_start - search_budget;
    budget -= l.spent;
    std::sort(l.cands.begin(), l.cands.end());
    if (!l.cands.empty()) ep = l.cands.front().second;
  }
  return p;
}

uint32_t Hnsw::insert(const uint8_t* encoded, uint64_t level_seed, uint32_t ef, const PreparedInsert* prepared) {
  if (prepared && (prepared->version != version_ || prepared->ef != ef)) prepared = nullptr;
  ++version_;
  const int level = level_for_seed(level_seed, p_.m);
  const uint32_t id = new_slot(level);
  std::copy(encoded, encoded + vec_bytes_, vecs_.at(id));
  ++count_;
  if (count_ == 1) {
    entry_ = id;
    max_level_ = level;
    return id;
  }
  const uint8_t* q = vector(id);
  uint32_t ep = greedy(q, entry_, max_level_, level);
  std::vector<std::vector<uint32_t>> at_risk(static_cast<size_t>(level) + 1);  // see repair()
  size_t budget = insert_distance_budget();
  for (int lv = std::min(level, max_level_); lv >= 0; --lv) {
    // A level's search may spend three quarters of what is left: the rest pays for selection and pruning here
    // and for the levels below.
    size_t search_budget = budget / 4 * 3;
    const size_t search_start = search_budget;
    const PreparedInsert::Level* ahead =
        prepared && static_cast<size_t>(lv) < prepared->levels.size() ? &prepared->levels[lv] : nullptr;
    std::vector<Pair> cands;
    // A search that ended by itself with no more than this level's budget ends the same way here.
    if (ahead && ahead->ep == ep && !ahead->stopped && ahead->spent <= search_budget) {
      cands = ahead->cands;
      search_budget -= ahead->spent;
    } else {
      cands = search_level(q, ep, ef ? ef : p_.ef_construction, lv, &search_budget);
      std::sort(cands.begin(), cands.end());
    }
    budget -= search_start - search_budget;
    if (cands.empty()) continue;
    ep = cands.front().second;
    const auto chosen = select(cands, p_.m, &budget);
    set_links(id, lv, chosen);
    at_risk[lv].push_back(id);  // its neighbours may all prune the link back to it
    for (uint32_t nb : chosen) add_link(nb, id, lv, &at_risk[lv], &budget);
  }
  if (level > max_level_) {
    max_level_ = level;
    entry_ = id;
  }
  repair(at_risk, UINT32_MAX);  // the new node too
  return id;
}

std::optional<uint32_t> Hnsw::remove(uint32_t id) {
  if (!contains(id)) throw std::out_of_range("HNSW remove: no node " + std::to_string(id));
  ++version_;
  // Nodes that may have lost their last incoming link on each level: the removed node's neighbours
  // (reconnect() takes no other link away).
  std::vector<std::vector<uint32_t>> at_risk(static_cast<size_t>(levels_[id]) + 1);
  for (int lv = 0; lv <= levels_[id]; ++lv) {
    const std::vector<uint32_t> pointing = in_[id][lv];
    const auto onward = links(id, lv);
    at_risk[lv].assign(onward.begin(), onward.end());
    reconnect(id, lv, pointing, reconnection_pool(id, lv));
    set_links(id, lv, {});
  }
  --count_;
  if (count_ > 0 && entry_ == id) {
    // The new entry point is the highest remaining node; the scan only happens when the entry goes.
    max_level_ = -1;
    for (uint32_t i = 0; i < slots(); ++i)
      if (i != id && levels_[i] > max_level_) {
        max_level_ = levels_[i];
        entry_ = i;
      }
  }
  // The removed node is unlinked: nothing leads to it, and repair() skips it.
  if (count_ > 0) repair(at_risk, id);
  const uint32_t last = slots() - 1;
  std::optional<uint32_t> moved;
  if (id != last) {
    move_node(last, id);
    moved = last;
  }
  drop_last_slot();
  if (count_ == 0) {
    max_level_ = -1;
    entry_ = 0;
  }
  return moved;
}

std::vector<uint32_t> Hnsw::reconnection_pool(uint32_t id, int lv) const {
  // The removed node's out-links nearest to it (all of them up to kReconnectPool): its neighbours'
  // replacements come from these. Past the distance budget, the first ones (a node's own links come
  // first, nearest first).
  const auto out = links(id, lv);
  std::vector<uint32_t> pool(out.begin(), out.end());
  if (pool.size() <= kReconnectPool) return pool;
  if (pool.size() > distance_budget()) {
    pool.resize(kReconnectPool);
    return pool;
  }
  std::vector<Pair> by_distance;
  by_distance.reserve(pool.size());
  for (uint32_t o : pool) by_distance.emplace_back(dist(vector(id), o), o);
  std::nth_element(by_distance.begin(), by_distance.begin() + kReconnectPool, by_distance.end());
  pool.clear();
  for (size_t i = 0; i < kReconnectPool; ++i) pool.push_back(by_distance[i].second);
  return pool;
}

void Hnsw::reconnect(uint32_t id, int lv, const std::vector<uint32_t>& pointing, const std::vector<uint32_t>& pool) {
  // Each node p that linked to the removed one keeps its other links and takes, from the pool, the
  // candidates the selection heuristic accepts (closer to p than to any link p has), up to its room;
  // it never gives a link up, so nothing else is put at risk and no list grows past what the
  // heuristic wants. That costs up to |pool| x (links of p) distances; once the removal's distance
  // budget cannot pay for it, p just replaces its link to the removed node with the pool's candidate
  // nearest to it, and past that with one taken in turn, so that every p keeps as many links as it had.
  size_t budget = distance_budget();
  size_t turn = 0;
  Visited& marks = t_link_marks;
  std::vector<uint32_t> next;
  std::vector<Pair> cands;
  for (uint32_t p : pointing) {
    const auto old = links(p, lv);
    next.clear();
    marks.begin(slots());
    for (uint32_t x : old)
      if (x != id) {
        next.push_back(x);
        marks.seen(x);
      }
    marks.seen(p);
    marks.seen(id);
    cands.clear();
    const size_t room = max_links(lv) - next.size();  // at least 1: the link to `id` is gone
    const size_t full_cost = pool.size() * (next.size() + std::min(room, pool.size()) + 1);
    const bool measure = budget >= pool.size();
    if (measure) {
      for (uint32_t c : pool)
        if (marks.mark[c] != marks.epoch) cands.emplace_back(dist(vector(p), c), c);
      budget -= pool.size();
      std::sort(cands.begin(), cands.end());
    } else {
      for (size_t k = 0; k < pool.size(); ++k) {
        const uint32_t c = pool[(turn + k) % pool.size()];
        if (marks.mark[c] != marks.epoch) {
          cands.emplace_back(0.0f, c);
          turn = turn + k + 1;
          break;
        }
      }
    }
    if (measure && budget >= full_cost) {
      const size_t before = next.size();
      for (const auto& [d, c] : cands) {
        if (next.size() - before >= room) break;
        bool good = true;
        for (uint32_t k : next) {
          --budget;
          if (dist(vector(c), k) < d) {
            good = false;
            break;
          }
        }
        if (good) next.push_back(c);
      }
      if (next.size() == before && !cands.empty()) next.push_back(cands.front().second);
    } else if (!cands.empty()) {
      next.push_back(cands.front().second);
    }
    set_links(p, lv, next);
  }
}

void Hnsw::repair(const std::vector<std::vector<uint32_t>>& at_risk, uint32_t skip) {
  // From the top level down: a node is reachable on a level when it is reached from the nodes of the
  // level above, which are repaired first. The relinks share one insert's distance budget.
  size_t budget = insert_distance_budget();
  for (int lv = static_cast<int>(at_risk.size()) - 1; lv >= 0; --lv) {
    t_reached.begin(slots());  // proofs hold for one level
    std::vector<uint32_t> queue = at_risk[lv];
    std::sort(queue.begin(), queue.end());  // a removal lists many nodes more than once
    queue.erase(std::unique(queue.begin(), queue.end()), queue.end());
    // Each relink makes one node reachable; the bound only guards against a cycle of replacements.
    for (size_t relinks = 0; !queue.empty() && relinks < 4 * at_risk[lv].size() + 64;) {
      const uint32_t x = queue.back();
      queue.pop_back();
      if (x == skip || x == entry_) continue;
      const auto island = unreached_ancestors(x, lv);
      if (island.empty()) continue;
      relink(x, lv, &queue, &budget);
      ++relinks;
      // The rest of the island reaches x but x may not reach it: check each again.
      for (uint32_t a : island)
        if (a != x) queue.push_back(a);
    }
  }
}

std::vector<uint32_t> Hnsw::unreached_ancestors(uint32_t x, int lv) const {
  // Walk the incoming links back from x. Reaching the entry point, a node that also lives on a higher
  // level (the walk down from the entry reaches those), a node an earlier walk proved reachable, or the
  // walk's bound counts as reachable; running out of ancestors first proves that nothing leads to x, and
  // the ancestors found are the island. A walk that ends reachable marks the path it found (t_reached),
  // so the many at-risk nodes of one removal mostly stop at their first step.
  constexpr size_t kMaxWalk = 1024;
  Visited& vis = t_walk_back;
  Visited& reached = t_reached;
  vis.begin(slots());
  if (x == entry_ || levels_[x] > lv || reached.mark[x] == reached.epoch) return {};
  std::vector<uint32_t> found{x};
  std::vector<uint32_t> parent{0};  // index in `found` of the node each one leads to
  vis.seen(x);
  for (size_t i = 0; i < found.size(); ++i) {
    const uint32_t n = found[i];
    for (uint32_t a : in_[n][lv])
      if (!vis.seen(a)) {
        if (found.size() >= kMaxWalk) {  // taken as reachable: x, not the nodes on the way (an island may lead to x)
          reached.mark[x] = reached.epoch;
          return {};
        }
        if (a == entry_ || levels_[a] > lv || reached.mark[a] == reached.epoch) {
          for (size_t j = i;; j = parent[j]) {  // a leads to n, n to ... to x: all reachable
            reached.mark[found[j]] = reached.epoch;
            if (j == 0) break;
          }
          return {};
        }
        found.push_back(a);
        parent.push_back(static_cast<uint32_t>(i));
      }
  }
  return found;
}

void Hnsw::relink(uint32_t x, int lv, std::vector<uint32_t>* orphans, size_t* budget) {
  // The nodes nearest x that a search reaches on this level (so they are reachable themselves); past
  // the budget the search keeps what it found, and with nothing found the greedy descent's end (a
  // reachable node) gives the link.
  const uint8_t* q = vector(x);
  const uint32_t ep = greedy(q, entry_, max_level_, lv);
  auto cands = search_level(q, ep, p_.ef_construction, lv, budget);
  std::sort(cands.begin(), cands.end());
  std::erase_if(cands, [x](const Pair& c) { return c.second == x; });
  if (cands.empty() && ep != x) {
    add_link(ep, x, lv, orphans);
    return;
  }
  // The nearest with a free slot takes the link.
  for (const auto& [d, c] : cands)
    if (links(c, lv).size() < max_links(lv)) {
      add_link(c, x, lv);
      return;
    }
  // All full: the nearest that can give up a link to a node with another incoming link replaces it
  // (the farthest such); that node is checked again.
  for (const auto& [d, c] : cands) {
    const auto out = links(c, lv);
    if (*budget < out.size()) break;  // cannot measure this one's links: the last resort below
    *budget -= out.size();
    std::optional<Pair> drop;
    for (uint32_t t : out)
      if (in_[t][lv].size() >= 2) {
        const float dt = dist(vector(c), t);
        if (!drop || dt > drop->first) drop = Pair{dt, t};
      }
    if (drop) {
      std::vector<uint32_t> next(out.begin(), out.end());
      std::replace(next.begin(), next.end(), drop->second, x);
      set_links(c, lv, next);
      orphans->push_back(drop->second);
      return;
    }
  }
  if (!cands.empty()) add_link(cands.front().second, x, lv, orphans);
}

std::vector<uint32_t> Hnsw::unreachable(int level) const {
  // The walk a search can take: the entry point's level from the entry point, each lower level from
  // every node reached above.
  std::vector<uint32_t> out;
  if (count_ == 0 || level > max_level_) return out;
  std::vector<char> seen(slots(), 0);
  std::vector<uint32_t> reached{entry_};
  seen[entry_] = 1;
  for (int lv = max_level_; lv >= level; --lv) {
    std::vector<uint32_t> stack = reached;
    while (!stack.empty()) {
      const uint32_t n = stack.back();
      stack.pop_back();
      for (uint32_t t : links(n, lv))
        if (!seen[t]) {
          seen[t] = 1;
          reached.push_back(t);
          stack.push_back(t);
        }
    }
  }
  for (uint32_t i = 0; i < slots(); ++i)
    if (contains(i) && levels_[i] >= level && !seen[i]) out.push_back(i);
  return out;
}

void Hnsw::move_node(uint32_t from, uint32_t to) {
  // `to` is unlinked. Everything naming `from` (its neighbours' incoming lists, the out-links of the
  // nodes pointing at it) is renamed, then its data moves.
  auto rename = [](uint32_t* first, uint32_t* last, uint32_t a, uint32_t b) { std::replace(first, last, a, b); };
  for (int lv = 0; lv <= levels_[from]; ++lv) {
    for (uint32_t t : links(from, lv)) rename(in_[t][lv].data(), in_[t][lv].data() + in_[t][lv].size(), from, to);
    for (uint32_t p : in_[from][lv]) {
      uint32_t* b = block(p, lv);
      rename(b + 1, b + 1 + b[0], from, to);
    }
  }
  std::copy_n(vector(from), vec_bytes_, vecs_.at(to));
  std::copy_n(block(from, 0), 1 + 2 * p_.m, block(to, 0));
  upper_[to] = std::move(upper_[from]);
  in_[to] = std::move(in_[from]);
  levels_[to] = levels_[from];
  if (entry_ == from) entry_ = to;
}

void Hnsw::drop_last_slot() {
  vecs_.pop_slot();
  links0_.pop_slot();
  upper_.pop_back();
  in_.pop_back();
  levels_.pop_back();
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
  Visited& vis = t_visited;
  vis.begin(slots());
  MinHeap cand;
  MaxHeap best, kept;
  size_t inspected = 1;
  const float d0 = dist(q, ep);
  vis.seen(ep);
  cand.emplace(d0, ep);
  best.emplace(d0, ep);
  if ((*accept)(ep)) kept.emplace(d0, ep);
  while (!cand.empty()) {
    const auto [d, c] = cand.top();
    if (best.size() >= ef && d > best.top().first && kept.size() >= k) break;
    if (filter_ef && inspected >= filter_ef) break;
    cand.pop();
    for (uint32_t nb : links(c, 0)) {
      if (vis.seen(nb)) continue;
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
  MaxHeap kept;
  for (uint32_t i = 0; i < slots(); ++i) {
    if (!contains(i) || (accept && !(*accept)(i))) continue;
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
  size_t bytes = sizeof(*this) + vecs_.memory_bytes() + links0_.memory_bytes() + levels_.size() +
                 upper_.size() * sizeof(upper_[0]) + in_.size() * sizeof(in_[0]);
  for (const auto& u : upper_) bytes += 4 * u.capacity();
  for (const auto& levels : in_) {
    bytes += levels.capacity() * sizeof(levels[0]);
    for (const auto& l : levels) bytes += 4 * l.capacity();
  }
  return bytes;
}

void Hnsw::restore_node(uint32_t id, int level, const uint8_t* encoded,
                        const std::vector<std::vector<uint32_t>>& out) {
  if (level < 0 || level > kMaxLevel) throw std::runtime_error("node " + std::to_string(id) + ": bad level");
  if (out.size() != static_cast<size_t>(level) + 1)
    throw std::runtime_error("node " + std::to_string(id) + ": link levels do not match its level");
  for (int lv = 0; lv <= level; ++lv) {
    if (out[lv].size() > max_links(lv)) throw std::runtime_error("node " + std::to_string(id) + ": too many links");
    // Removal unlinks one copy of each link: a repeated one would leave a stale incoming link behind.
    std::vector<uint32_t> sorted = out[lv];
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw std::runtime_error("node " + std::to_string(id) + ": repeated link");
  }
  if (contains(id)) throw std::runtime_error("node " + std::to_string(id) + " appears twice");
  while (slots() <= id) {  // slots not restored yet stay at level -1; finish_restore checks none is left
    const uint32_t hole = new_slot(0);
    levels_[hole] = -1;
  }
  ++version_;
  levels_[id] = static_cast<int8_t>(level);
  upper_[id].assign(static_cast<size_t>(level) * (1 + p_.m), 0);
  in_[id].assign(static_cast<size_t>(level) + 1, {});
  std::copy(encoded, encoded + vec_bytes_, vecs_.at(id));
  for (int lv = 0; lv <= level; ++lv) {
    uint32_t* b = block(id, lv);
    b[0] = static_cast<uint32_t>(out[lv].size());
    std::copy(out[lv].begin(), out[lv].end(), b + 1);
  }
  ++count_;
}

void Hnsw::finish_restore(uint32_t entry) {
  max_level_ = -1;
  for (uint32_t i = 0; i < slots(); ++i) {
    if (!contains(i)) throw std::runtime_error("node " + std::to_string(i) + " missing");
    max_level_ = std::max<int>(max_level_, levels_[i]);
    for (int lv = 0; lv <= levels_[i]; ++lv) {
      for (uint32_t t : links(i, lv)) {
        if (!contains(t) || levels_[t] < lv || t == i)
          throw std::runtime_error("node " + std::to_string(i) + ": link to missing node " + std::to_string(t));
        in_[t][lv].push_back(i);
      }
    }
  }
  if (count_ == 0) return;
  if (!contains(entry) || levels_[entry] != max_level_) throw std::runtime_error("bad HNSW entry point");
  entry_ = entry;
}

}  // namespace infer::vector
