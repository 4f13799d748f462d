#include "grammar/vocab_trie.h"

#include "grammar/utf8_feed.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <numeric>

namespace infer::grammar {

VocabTrie::VocabTrie(const tokenizer::Tokenizer& tok) : n_vocab_(tok.n_vocab()), fingerprint_(tok.fingerprint()) {
  using tokenizer::TokenType;
  pieces_.resize(size_t(n_vocab_));
  in_trie_.assign(size_t(n_vocab_), false);
  is_eog_.assign(size_t(n_vocab_), false);
  std::vector<int32_t> order;
  for (int32_t id = 0; id < n_vocab_; ++id) {
    if (tok.is_eog(id)) {
      is_eog_[size_t(id)] = true;
      eog_ids_.push_back(id);
      continue;
    }
    const TokenType t = tok.token_type(id);
    if (t == TokenType::Control || t == TokenType::Unknown || t == TokenType::Unused) continue;
    std::string p = tok.token_to_piece(id, /*remove_special=*/true);  // engine::generated_piece
    if (p.empty() || p.size() > 0xFFFF) continue;
    pieces_[size_t(id)] = std::move(p);
    in_trie_[size_t(id)] = true;
    order.push_back(id);
  }
  // Sorted bytewise (std::string compares as unsigned char), a token's node is the newest one on the
  // path or the one of the token before it: tokens come out grouped by node, in node order.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pieces_[size_t(a)] < pieces_[size_t(b)]; });
  std::vector<uint32_t> path;       // node at each depth of the current path
  std::vector<uint32_t> n_tokens;   // per node
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& p = pieces_[size_t(id)];
    size_t common = 0;
    if (prev) {
      const size_t lim = std::min(prev->size(), p.size());
      while (common < lim && (*prev)[common] == p[common]) ++common;
    }
    while (path.size() > common) {
      end_[path.back()] = uint32_t(byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < p.size(); ++d) {
      path.push_back(uint32_t(byte_.size()));
      byte_.push_back(uint8_t(p[d]));
      depth_.push_back(uint16_t(d + 1));
      end_.push_back(0);
      n_tokens.push_back(0);
    }
    max_depth_ = std::max<uint16_t>(max_depth_, uint16_t(p.size()));
    n_tokens[path.back()]++;
    tok_ids_.push_back(id);
    prev = &p;
  }
  while (!path.empty()) {
    end_[path.back()] = uint32_t(byte_.size());
    path.pop_back();
  }
  tok_begin_.assign(byte_.size() + 1, 0);
  for (size_t i = 0; i < byte_.size(); ++i) tok_begin_[i + 1] = tok_begin_[i] + n_tokens[i];
  summarise_subtrees();
}

void VocabTrie::summarise_subtrees() {
  const size_t n = byte_.size();
  sub_ascii_.assign(n, {0, 0});
  sub_flags_.assign(n, 0);
  // Each node's own facts, decoding its path from the token's start (frames by depth).
  std::vector<Utf8Partial> frames(size_t(max_depth_) + 1);
  std::vector<bool> bad_path(size_t(max_depth_) + 1, false);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t d = depth_[i];
    const uint8_t b = byte_[i];
    Utf8Partial p = frames[d - 1];
    uint32_t cp;
    const bool bad = bad_path[d - 1] || utf8_feed(p, b, &cp) < 0;
    frames[d] = p;
    bad_path[d] = bad;
    if (b < 0x80)
      sub_ascii_[i][b >> 6] |= uint64_t(1) << (b & 63);
    else
      sub_flags_[i] |= kHasWide;
    if (bad) sub_flags_[i] |= kIllFormed;
  }
  // Then each subtree's: children follow their parent in preorder, so from the last node back each
  // node's summary is complete when it is folded into its parent (the nearest node before it one
  // level up).
  std::vector<uint32_t> parent(n);
  std::vector<uint32_t> path;
  for (size_t i = 0; i < n; ++i) {
    path.resize(depth_[i] - 1);
    parent[i] = path.empty() ? UINT32_MAX : path.back();
    path.push_back(uint32_t(i));
  }
  for (size_t i = n; i-- > 0;) {
    if (parent[i] == UINT32_MAX) continue;
    auto& to = sub_ascii_[parent[i]];
    to[0] |= sub_ascii_[i][0];
    to[1] |= sub_ascii_[i][1];
    sub_flags_[parent[i]] |= sub_flags_[i];
  }
}

std::shared_ptr<const VocabTrie> VocabTrie::of(const tokenizer::Tokenizer& tok) {
  constexpr size_t kKeep = 4;  // vocabularies cached
  static std::mutex mu;
  static std::list<std::shared_ptr<const VocabTrie>> recent;  // most recently used first
  const uint64_t fp = tok.fingerprint();
  {
    std::lock_guard lock(mu);
    for (auto it = recent.begin(); it != recent.end(); ++it)
      if ((*it)->fingerprint() == fp) {
        recent.splice(recent.begin(), recent, it);
        return recent.front();
      }
  }
  auto trie = std::make_shared<const VocabTrie>(tok);  // built outside the lock: it takes a while
  std::lock_guard lock(mu);
  for (auto& t : recent)
    if (t->fingerprint() == fp) return t;
  recent.push_front(trie);
  if (recent.size() > kKeep) recent.pop_back();
  return trie;
}

}  // namespace infer::grammar
