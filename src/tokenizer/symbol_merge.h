// The merge loop shared by the BPE and SPM encoders (llama.cpp's llm_tokenizer_bpe/spm sessions):
// split text into UTF-8 characters, then repeatedly merge the adjacent pair with the highest
// priority (ties: leftmost) until no pair has one. The encoders differ only in how a pair is ranked.
#pragma once
#include <algorithm>
#include <optional>
#include <queue>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tokenizer/utf8.h"

namespace infer::tokenizer {

// pair_priority(left, right) -> std::optional<P>: the priority of merging two adjacent pieces
// (`right` starts where `left` ends in `text`), or nullopt when they must not merge; higher merges
// first. on_piece(piece) is then called for each final piece, left to right. Views point into `text`.
template <typename PairPriority, typename OnPiece>
void merge_symbols(std::string_view text, PairPriority pair_priority, OnPiece on_piece) {
  using Priority = typename std::invoke_result_t<PairPriority&, std::string_view, std::string_view>::value_type;
  struct Symbol {
    int prev;
    int next;
    size_t begin;  // byte offset into the text
    size_t n;      // bytes; 0 once merged into its left neighbour
  };
  struct Bigram {
    int left;
    int right;
    Priority priority;
    size_t size;  // bytes of the merged text, to spot pairs made stale by other merges
  };
  struct LowerPriority {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };

  if (text.empty()) return;
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t n = std::min(utf8::sequence_length(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offset + n == text.size() ? -1 : index + 1, offset, n});
    offset += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
  const auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (std::optional<Priority> found = pair_priority(text.substr(l.begin, l.n), text.substr(r.begin, r.n)))
      queue.push({left, right, *found, l.n + r.n});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    // Symbols only grow or vanish, so an unchanged total size means the pair is still current.
    if (left.n == 0 || right.n == 0 || left.n + right.n != top.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    try_pair(left.prev, top.left);
    try_pair(top.left, left.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) on_piece(text.substr(symbols[i].begin, symbols[i].n));
}

}  // namespace infer::tokenizer
