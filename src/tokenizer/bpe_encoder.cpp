#include "tokenizer/bpe_encoder.h"

#include <queue>

#include "tokenizer/utf8.h"

namespace infer::tokenizer {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t begin;
  size_t n;
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  size_t size;
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

int32_t BpeEncoder::rank(std::string_view left, std::string_view right) {
  // Merges are stored as "A B" split at the first space after byte 0, so A has no later space.
  if (left.find(' ', 1) != std::string_view::npos) return -1;
  key_.assign(left);
  key_ += ' ';
  key_ += right;
  auto it = vocab_.merge_rank.find(std::string_view(key_));
  return it == vocab_.merge_rank.end() ? -1 : it->second;
}

void BpeEncoder::encode_word(std::string_view word, std::vector<TokenId>& out) {
  if (word.empty()) return;
  if (vocab_.ignore_merges) {
    if (TokenId id = vocab_.find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t offset = 0; offset < word.size();) {
    const size_t n = std::min(utf8::sequence_length(static_cast<uint8_t>(word[offset])), word.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offset + n == word.size() ? -1 : index + 1, offset, n});
    offset += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
  const auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const int32_t found = rank(word.substr(l.begin, l.n), word.substr(r.begin, r.n));
    if (found >= 0) queue.push({left, right, found, l.n + r.n});
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

  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = word.substr(symbols[i].begin, symbols[i].n);
    if (TokenId id = vocab_.find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (const char& c : piece)
      if (TokenId id = vocab_.find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
  }
}

}  // namespace infer::tokenizer
