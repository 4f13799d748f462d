#include "tokenizer/spm_encoder.h"

#include <queue>
#include <stdexcept>

#include "tokenizer/utf8.h"

namespace infer::tokenizer {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t begin;  // byte offset into the text
  size_t n;      // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;  // bytes of the merged text, to spot pairs made stale by other merges
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

TokenId spm_byte_token(const Vocab& vocab, uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  if (TokenId id = vocab.find(std::string_view(name, 6)); id >= 0) return id;
  const char raw = static_cast<char>(byte);
  if (TokenId id = vocab.find(std::string_view(&raw, 1)); id >= 0) return id;
  if (vocab.unk >= 0) return vocab.unk;
  throw std::runtime_error("tokenizer: vocabulary has no token for byte " + std::string(name, 6));
}

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
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
    const std::string_view merged = text.substr(symbols[left].begin, symbols[left].n + symbols[right].n);
    const TokenId id = vocab.find(merged);
    if (id < 0) return;
    queue.push({left, right, vocab.tokens[id].score, merged.size()});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != top.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    try_pair(left.prev, top.left);
    try_pair(top.left, left.next);
  }

  // Merged pieces are vocab entries by construction; only single characters can be missing.
  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].n);
    if (TokenId id = vocab.find(piece); id >= 0) {
      out.push_back(id);
    } else {
      for (char c : piece) out.push_back(spm_byte_token(vocab, static_cast<uint8_t>(c)));
    }
  }
}

}  // namespace infer::tokenizer
