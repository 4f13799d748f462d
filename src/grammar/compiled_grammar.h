// Constrained decoding over a vocabulary: a Grammar joined to a VocabTrie, giving per-sequence
// GrammarMatchers the set of tokens that keep the text a prefix of the language.
//
// A TokenMask comes from a walk of the vocabulary trie against the recogniser's state: a subtree is
// skipped at its first byte no stack accepts, so a state that allows few tokens costs little, and the
// mask is cached by state (with the UTF-8 decoder's partial state), so a state met again costs a
// lookup. The masks and the recogniser's states are shared by every matcher of one CompiledGrammar.
// Cached masks take at most 64 MiB per grammar and 256 MiB in all; past that a grammar's cache starts
// again.
//
// Thread-safety: a CompiledGrammar may be used by matchers on any threads (its caches are under its
// own lock); one GrammarMatcher belongs to one thread at a time. compile_grammar is thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/recognizer.h"
#include "grammar/utf8_feed.h"
#include "grammar/vocab_trie.h"
#include "tokenizer/tokenizer.h"

namespace infer::grammar {

// Which tokens may come next: bit `id` of `bits` set when token `id` is allowed.
struct TokenMask {
  std::vector<uint64_t> bits;  // (n_vocab + 63) / 64 words
  int n_allowed = 0;
  bool allows(int32_t id) const { return (bits[size_t(id) >> 6] >> (id & 63)) & 1; }
};

class CompiledGrammar {
 public:
  CompiledGrammar(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabTrie> vocab, std::string text);
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Grammar& grammar() const { return *grammar_; }
  const VocabTrie& vocab() const { return *vocab_; }
  const std::string& text() const { return text_; }  // the GBNF it was compiled from
  // Masks computed (cache misses) and served from the cache, for tests and benchmarks.
  uint64_t masks_computed() const;
  uint64_t masks_cached() const;
  double mask_compute_seconds() const;  // time spent computing the masks_computed() ones

  // Where a matcher is: the recogniser's state and a code point begun but not finished.
  struct Position {
    StateId state = RecognizerStates::kDead;
    Utf8Partial partial;
  };
  Position start() const;
  // The allowed tokens at `at`: end-of-generation tokens only where the language may end.
  std::shared_ptr<const TokenMask> mask(const Position& at) const;
  // `at` advanced by `bytes`; a position in the dead state when they leave the language.
  Position advance(const Position& at, std::string_view bytes) const;
  bool can_end(const Position& at) const;
  bool complete(const Position& at) const;

 private:
  std::shared_ptr<TokenMask> walk(const Position& at) const;  // under mu_

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabTrie> vocab_;
  std::string text_;
  mutable std::mutex mu_;
  mutable RecognizerStates states_;
  mutable std::unordered_map<uint64_t, std::shared_ptr<const TokenMask>> masks_;
  mutable uint64_t computed_ = 0, cached_ = 0;
  mutable double compute_s_ = 0;
  mutable size_t mask_bytes_ = 0;  // of masks_
};

// Parses `gbnf` (GrammarError on a bad grammar) and joins it to `tok`'s vocabulary trie. The result is
// cached by (text, vocabulary): the same grammar again returns the same object, with its masks already
// computed; the cache keeps the last 64 grammars. Thread-safe.
std::shared_ptr<const CompiledGrammar> compile_grammar(std::string_view gbnf, const tokenizer::Tokenizer& tok);

// One sequence's progress through a CompiledGrammar.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> g);

  // Tokens that may come next (valid until this matcher or its grammar is gone).
  std::shared_ptr<const TokenMask> allowed() const { return g_->mask(at_); }
  // Takes token `id`: false (nothing changes) when the grammar does not allow it. An end-of-generation
  // token is allowed where the language may end, and then completes the matcher.
  bool accept(int32_t id);
  bool can_end() const { return can_end_; }
  // No token can follow: the language has ended (generation stops here).
  bool complete() const { return complete_; }
  const CompiledGrammar& grammar() const { return *g_; }

 private:
  std::shared_ptr<const CompiledGrammar> g_;
  CompiledGrammar::Position at_;
  bool can_end_ = false, complete_ = false;
};

}  // namespace infer::grammar
