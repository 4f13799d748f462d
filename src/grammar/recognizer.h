// The pushdown recogniser for a Grammar over Unicode code points, as a set of interned states.
//
// A stack is a list of element positions (the top is the next thing to match; below it, where each
// enclosing rule continues), stored as an interned node (position, parent node); node 0 is the empty
// stack: everything matched. A state is the sorted set of stacks whose tops are all characters (rule
// references expanded), interned too, so that equal states have equal ids: token masks are cached by
// state id (token_mask.h), and the transition on a code point is memoised per state.
//
// Thread-safety: none; a RecognizerStates is used under its owner's lock (CompiledGrammar) or by one
// thread (grammar_accepts). Memory grows with the states met (nodes, states and transitions), which a
// grammar's generation visits again and again: JSON at one nesting depth is a handful of states.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "grammar/gbnf.h"

namespace infer::grammar {

using StateId = uint32_t;

class RecognizerStates {
 public:
  static constexpr StateId kDead = 0;  // no stack: the text so far is not a prefix of the language

  explicit RecognizerStates(std::shared_ptr<const Grammar> g);

  StateId initial() const { return initial_; }
  // The state after code point `cp`; kDead when no stack accepts it (and from kDead).
  StateId advance(StateId s, uint32_t cp) {
    if (cp < 128) {
      const int32_t t = states_[s].ascii_next[cp];
      if (t >= 0) return StateId(t);
      const StateId next = compute_advance(s, cp);  // may add states: index again after it
      states_[s].ascii_next[cp] = int32_t(next);
      return next;
    }
    return advance_slow(s, cp);
  }
  // The language may end here (the empty stack is in the state).
  bool can_end(StateId s) const { return states_[s].can_end; }
  // The language must end here: only the empty stack, no character can follow.
  bool complete(StateId s) const { return states_[s].complete; }
  // Whether some code point in [lo, hi] can come next (for a UTF-8 sequence not yet complete).
  bool accepts_some(StateId s, uint32_t lo, uint32_t hi) const;
  // The characters that lead from `s` back to `s` (inside a string: almost all of them): the ASCII
  // ones as bits, and whether every code point from U+0080 up does.
  struct Loops {
    std::array<uint64_t, 2> ascii{0, 0};
    bool wide = false;
  };
  const Loops& loops(StateId s);
  size_t n_states() const { return states_.size(); }

 private:
  struct Node {
    uint32_t pos, parent;
  };
  struct State {
    std::vector<uint32_t> stacks;  // sorted node ids
    bool can_end = false, complete = false;
    std::array<int32_t, 128> ascii_next;  // memoised advance on ASCII; -1 not computed
    bool loops_known = false;
    Loops loops;
  };
  struct VecHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };

  uint32_t node(uint32_t pos, uint32_t parent);
  void expand(uint32_t n, std::vector<uint32_t>& out);
  StateId intern(std::vector<uint32_t>& stacks);
  StateId compute_advance(StateId s, uint32_t cp);
  StateId advance_slow(StateId s, uint32_t cp);

  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<std::vector<uint32_t>> expanded_;  // per node: its expansion; empty = not computed
  std::vector<State> states_;
  std::unordered_map<std::vector<uint32_t>, StateId, VecHash> state_ids_;
  std::unordered_map<uint64_t, StateId> wide_next_;  // (state, cp >= 128) → state
  std::vector<uint32_t> scratch_;
  StateId initial_ = kDead;
};

}  // namespace infer::grammar
