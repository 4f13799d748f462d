#include "grammar/recognizer.h"

#include <algorithm>

namespace infer::grammar {

size_t RecognizerStates::VecHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t x : v) h = (h ^ x) * 0x100000001b3ull;
  return size_t(h ^ (h >> 29));
}

RecognizerStates::RecognizerStates(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
  nodes_.push_back({0, 0});  // node 0: the empty stack
  expanded_.emplace_back();
  std::vector<uint32_t> none;
  intern(none);  // state 0: dead
  // The start: the root rule's reference on an empty stack, expanded.
  std::vector<uint32_t> start;
  for (uint32_t alt : g_->alternatives(g_->root())) {
    if (g_->elements()[alt].kind == Element::Kind::End)
      expand(0, start);
    else
      expand(node(alt, 0), start);
  }
  initial_ = intern(start);
}

uint32_t RecognizerStates::node(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t(pos) << 32) | parent;
  auto [it, fresh] = node_ids_.try_emplace(key, uint32_t(nodes_.size()));
  if (fresh) {
    nodes_.push_back({pos, parent});
    expanded_.emplace_back();
  }
  return it->second;
}

// Appends the stacks `n` stands for once every rule reference on its top is replaced by the rule's
// alternatives: stacks with a character on top, or the empty stack. Terminates: the parser refuses
// left recursion.
void RecognizerStates::expand(uint32_t n, std::vector<uint32_t>& out) {
  if (!expanded_[n].empty()) {
    out.insert(out.end(), expanded_[n].begin(), expanded_[n].end());
    return;
  }
  std::vector<uint32_t> mine;
  const auto& el = g_->elements();
  if (n == 0 || el[nodes_[n].pos].kind == Element::Kind::Chars) {
    mine.push_back(n);
  } else {
    const uint32_t pos = nodes_[n].pos, parent = nodes_[n].parent;
    const uint32_t rest = el[pos + 1].kind == Element::Kind::End ? parent : node(pos + 1, parent);
    for (uint32_t alt : g_->alternatives(el[pos].rule)) {
      if (el[alt].kind == Element::Kind::End)
        expand(rest, mine);
      else
        expand(node(alt, rest), mine);
    }
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  }
  out.insert(out.end(), mine.begin(), mine.end());
  expanded_[n] = std::move(mine);  // non-empty: every rule has an alternative, and none loops
}

StateId RecognizerStates::intern(std::vector<uint32_t>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  auto it = state_ids_.find(stacks);
  if (it != state_ids_.end()) return it->second;
  const StateId id = StateId(states_.size());
  State st;
  st.stacks = stacks;
  st.can_end = !stacks.empty() && stacks.front() == 0;
  st.complete = stacks.size() == 1 && stacks.front() == 0;
  st.ascii_next.fill(-1);
  states_.push_back(std::move(st));
  state_ids_.emplace(stacks, id);
  return id;
}

StateId RecognizerStates::compute_advance(StateId s, uint32_t cp) {
  if (s == kDead) return kDead;
  const auto& el = g_->elements();
  std::vector<uint32_t> next;
  // Index loop: expand() may grow nodes_ and states_ is not touched until intern().
  const size_t n_stacks = states_[s].stacks.size();
  for (size_t i = 0; i < n_stacks; ++i) {
    const uint32_t n = states_[s].stacks[i];
    if (n == 0) continue;
    const uint32_t pos = nodes_[n].pos, parent = nodes_[n].parent;
    if (!g_->matches(pos, cp)) continue;
    const uint32_t rest = el[pos + 1].kind == Element::Kind::End ? parent : node(pos + 1, parent);
    expand(rest, next);
  }
  return intern(next);
}

StateId RecognizerStates::advance_slow(StateId s, uint32_t cp) {
  const uint64_t key = (uint64_t(s) << 32) | cp;
  auto it = wide_next_.find(key);
  if (it != wide_next_.end()) return it->second;
  const StateId t = compute_advance(s, cp);
  wide_next_.emplace(key, t);
  return t;
}

const RecognizerStates::Loops& RecognizerStates::loops(StateId s) {
  if (!states_[s].loops_known) {
    Loops l;
    if (s != kDead) {
      for (uint32_t c = 0; c < 128; ++c)
        if (advance(s, c) == s) l.ascii[c >> 6] |= uint64_t(1) << (c & 63);
      // Every code point from U+0080 up goes to one state when each stack's top matches all of them
      // or none: then U+0080 stands for them all.
      bool uniform = true;
      for (uint32_t n : states_[s].stacks) {
        if (n == 0) continue;
        const uint32_t pos = nodes_[n].pos;
        if (g_->matches_some(pos, 0x80, 0x10FFFF) && !g_->matches_all(pos, 0x80, 0x10FFFF)) uniform = false;
      }
      l.wide = uniform && advance(s, 0x80) == s;
    }
    states_[s].loops = l;
    states_[s].loops_known = true;
  }
  return states_[s].loops;
}

bool RecognizerStates::accepts_some(StateId s, uint32_t lo, uint32_t hi) const {
  for (uint32_t n : states_[s].stacks)
    if (n != 0 && g_->matches_some(nodes_[n].pos, lo, hi)) return true;
  return false;
}

}  // namespace infer::grammar
