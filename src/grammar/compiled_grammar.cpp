#include "grammar/compiled_grammar.h"

#include <atomic>
#include <chrono>
#include <list>

namespace infer::grammar {

namespace {

// Cached masks: at most 64 MiB per grammar and 256 MiB for all of them (a 152k-token mask is 19 KiB);
// a grammar over either starts its own cache again (masks in use stay alive with their holders).
constexpr size_t kMaskCacheBytes = size_t(64) << 20;
constexpr size_t kAllMasksBytes = size_t(256) << 20;
constexpr size_t kGrammarsKept = 64;
std::atomic<size_t> all_mask_bytes{0};

uint64_t mask_key(const CompiledGrammar::Position& at) {
  return (uint64_t(at.state) << 32) | (uint64_t(at.partial.remain) << 24) | at.partial.value;
}

}  // namespace

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabTrie> vocab, std::string text)
    : grammar_(std::move(g)), vocab_(std::move(vocab)), text_(std::move(text)), states_(grammar_) {}

CompiledGrammar::~CompiledGrammar() { all_mask_bytes -= mask_bytes_; }

uint64_t CompiledGrammar::masks_computed() const {
  std::lock_guard lock(mu_);
  return computed_;
}
double CompiledGrammar::mask_compute_seconds() const {
  std::lock_guard lock(mu_);
  return compute_s_;
}
uint64_t CompiledGrammar::masks_cached() const {
  std::lock_guard lock(mu_);
  return cached_;
}

CompiledGrammar::Position CompiledGrammar::start() const {
  std::lock_guard lock(mu_);
  return Position{states_.initial(), {}};
}

bool CompiledGrammar::can_end(const Position& at) const {
  std::lock_guard lock(mu_);
  return at.partial.remain == 0 && states_.can_end(at.state);
}

bool CompiledGrammar::complete(const Position& at) const {
  std::lock_guard lock(mu_);
  return at.partial.remain == 0 && states_.complete(at.state);
}

CompiledGrammar::Position CompiledGrammar::advance(const Position& at, std::string_view bytes) const {
  std::lock_guard lock(mu_);
  Position p = at;
  for (char c : bytes) {
    uint32_t cp;
    const int r = utf8_feed(p.partial, uint8_t(c), &cp);
    if (r < 0) return Position{};
    if (r == 1) p.state = states_.advance(p.state, cp);
    if (p.state == RecognizerStates::kDead) return Position{};
  }
  if (p.partial.remain != 0) {
    auto [lo, hi] = utf8_partial_range(p.partial);
    if (!states_.accepts_some(p.state, lo, hi)) return Position{};
  }
  return p;
}

std::shared_ptr<const TokenMask> CompiledGrammar::mask(const Position& at) const {
  std::lock_guard lock(mu_);
  const uint64_t key = mask_key(at);
  auto it = masks_.find(key);
  if (it != masks_.end()) {
    ++cached_;
    return it->second;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const TokenMask> m = walk(at);
  compute_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++computed_;
  const size_t mask_bytes = m->bits.size() * sizeof(uint64_t) + 64;
  if (mask_bytes_ + mask_bytes > kMaskCacheBytes || all_mask_bytes.load() + mask_bytes > kAllMasksBytes) {
    all_mask_bytes -= mask_bytes_;
    mask_bytes_ = 0;
    masks_.clear();
  }
  masks_.emplace(key, m);
  mask_bytes_ += mask_bytes;
  all_mask_bytes += mask_bytes;
  return m;
}

// Depth-first over the trie's preorder array: frame d is the position after the first d bytes of the
// current path. A node whose byte no stack accepts is skipped with its whole subtree.
std::shared_ptr<TokenMask> CompiledGrammar::walk(const Position& at) const {
  const VocabTrie& v = *vocab_;
  auto m = std::make_shared<TokenMask>();
  m->bits.assign((size_t(v.n_vocab()) + 63) / 64, 0);
  auto allow = [&](int32_t id) {
    m->bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    ++m->n_allowed;
  };
  if (at.state == RecognizerStates::kDead) return m;
  if (at.partial.remain == 0 && states_.can_end(at.state))
    for (int32_t id : v.eog_ids()) allow(id);

  std::vector<Position> frames(size_t(v.max_depth()) + 1);
  frames[0] = at;
  const size_t n = v.n_nodes();
  const auto& ids = v.token_ids();
  // The summaries decode paths from a token's start: they hold when the walk starts between code points.
  const bool summaries = at.partial.remain == 0;
  for (size_t i = 0; i < n;) {
    const uint16_t d = v.depth(i);
    const Position& from = frames[d - 1];
    // A subtree whose every character loops on this state: all its tokens, without the walk.
    if (summaries && v.subtree_well_formed(i)) {
      const RecognizerStates::Loops& loops = states_.loops(from.state);
      const auto& sub = v.subtree_ascii(i);
      if ((sub[0] & ~loops.ascii[0]) == 0 && (sub[1] & ~loops.ascii[1]) == 0 && (loops.wide || !v.subtree_has_wide(i))) {
        const uint32_t end = v.subtree_end(i);
        for (uint32_t k = v.tokens_begin(i); k < v.tokens_begin(end); ++k) allow(ids[k]);
        i = end;
        continue;
      }
    }
    Position to = from;
    uint32_t cp;
    const uint8_t b = v.byte(i);
    int r;
    if (from.partial.remain == 0 && b < 0x80) {
      to.state = states_.advance(from.state, b);
      r = 1;
    } else {
      r = utf8_feed(to.partial, b, &cp);
      if (r == 1) to.state = states_.advance(from.state, cp);
    }
    bool alive = r >= 0 && to.state != RecognizerStates::kDead;
    // A lead byte: prune unless some stack accepts a code point it can begin.
    if (alive && r == 0 && from.partial.remain == 0) {
      auto [lo, hi] = utf8_partial_range(to.partial);
      alive = states_.accepts_some(to.state, lo, hi);
    }
    if (!alive) {
      i = v.subtree_end(i);
      continue;
    }
    frames[d] = to;
    const uint32_t tb = v.tokens_begin(i), te = v.tokens_begin(i + 1);
    if (tb != te) {
      bool ok = true;
      if (to.partial.remain != 0 && from.partial.remain != 0) {  // ends inside a code point
        auto [lo, hi] = utf8_partial_range(to.partial);
        ok = states_.accepts_some(to.state, lo, hi);
      }
      if (ok)
        for (uint32_t k = tb; k < te; ++k) allow(ids[k]);
    }
    ++i;
  }
  return m;
}

std::shared_ptr<const CompiledGrammar> compile_grammar(std::string_view gbnf, const tokenizer::Tokenizer& tok) {
  static std::mutex mu;
  static std::list<std::shared_ptr<const CompiledGrammar>> recent;  // most recently used first
  const uint64_t fp = tok.fingerprint();
  auto find = [&]() -> std::shared_ptr<const CompiledGrammar> {
    for (auto it = recent.begin(); it != recent.end(); ++it)
      if ((*it)->vocab().fingerprint() == fp && (*it)->text() == gbnf) {
        recent.splice(recent.begin(), recent, it);
        return recent.front();
      }
    return nullptr;
  };
  {
    std::lock_guard lock(mu);
    if (auto g = find()) return g;
  }
  // Parsing and the trie are built outside the lock: another grammar need not wait for them.
  auto g = std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf), VocabTrie::of(tok), std::string(gbnf));
  std::lock_guard lock(mu);
  if (auto found = find()) return found;
  recent.push_front(g);
  if (recent.size() > kGrammarsKept) recent.pop_back();
  return g;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> g) : g_(std::move(g)), at_(g_->start()) {
  can_end_ = g_->can_end(at_);
  complete_ = g_->complete(at_);
}

bool GrammarMatcher::accept(int32_t id) {
  const VocabTrie& v = g_->vocab();
  if (id < 0 || id >= v.n_vocab() || complete_) return false;
  if (v.is_eog(id)) {
    if (!can_end_) return false;
    complete_ = true;
    return true;
  }
  if (!v.in_trie(id)) return false;
  const CompiledGrammar::Position next = g_->advance(at_, v.piece(id));
  if (next.state == RecognizerStates::kDead) return false;
  at_ = next;
  can_end_ = g_->can_end(at_);
  complete_ = g_->complete(at_);
  return true;
}

}  // namespace infer::grammar
