// A vocabulary's tokens as a trie of the bytes each adds to the output text, for token masks.
//
// A token's bytes are engine::generated_piece's: Tokenizer::token_to_piece with special tokens rendered
// empty (SPM ▁ → space and <0xNN> → the byte, BPE byte-to-unicode pieces → their bytes, WordPiece as
// the tokenizer writes it), so constrained text is exactly the text the output gets. Control, unknown
// and unused tokens, end-of-generation tokens and tokens that add no text are not in the trie: a
// grammar never allows them (end-of-generation tokens are allowed apart, where the language may end).
//
// Layout: nodes in depth-first preorder, so that a walk is a loop over an array that skips a subtree
// by jumping to its end: per node its byte, its depth (1 for a first byte), the index one past its
// subtree, and its tokens (ids whose bytes end at it; a subtree's tokens are contiguous). Per node also
// a summary of its subtree, for a walk to allow a whole subtree at once where the grammar's state loops
// on every character in it (inside a string): the ASCII bytes in it, whether it has other bytes, and
// whether every path in it is well-formed UTF-8 (complete or cut short) from a token's start.
//
// Thread-safety: immutable after construction.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace infer::grammar {

class VocabTrie {
 public:
  explicit VocabTrie(const tokenizer::Tokenizer& tok);
  // The trie of `tok`'s vocabulary, built once per vocabulary (by Tokenizer::fingerprint) and shared;
  // the last few vocabularies stay cached. Thread-safe.
  static std::shared_ptr<const VocabTrie> of(const tokenizer::Tokenizer& tok);

  int n_vocab() const { return n_vocab_; }
  uint64_t fingerprint() const { return fingerprint_; }
  size_t n_nodes() const { return byte_.size(); }
  uint8_t byte(size_t node) const { return byte_[node]; }
  uint16_t depth(size_t node) const { return depth_[node]; }
  uint32_t subtree_end(size_t node) const { return end_[node]; }
  // Tokens ending at `node`: token_ids()[tokens_begin(node) .. tokens_begin(node + 1)).
  uint32_t tokens_begin(size_t node) const { return tok_begin_[node]; }
  const std::vector<int32_t>& token_ids() const { return tok_ids_; }
  const std::array<uint64_t, 2>& subtree_ascii(size_t node) const { return sub_ascii_[node]; }
  bool subtree_has_wide(size_t node) const { return sub_flags_[node] & kHasWide; }
  bool subtree_well_formed(size_t node) const { return !(sub_flags_[node] & kIllFormed); }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  uint16_t max_depth() const { return max_depth_; }

  // The bytes token `id` adds to the text; empty for tokens outside the trie.
  const std::string& piece(int32_t id) const { return pieces_[size_t(id)]; }
  bool in_trie(int32_t id) const { return in_trie_[size_t(id)]; }
  bool is_eog(int32_t id) const { return is_eog_[size_t(id)]; }

 private:
  void summarise_subtrees();

  int n_vocab_;
  uint64_t fingerprint_;
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;
  std::vector<uint32_t> tok_begin_;  // n_nodes + 1
  std::vector<int32_t> tok_ids_;
  std::vector<int32_t> eog_ids_;
  std::vector<std::string> pieces_;
  std::vector<bool> in_trie_, is_eog_;
  uint16_t max_depth_ = 0;
  static constexpr uint8_t kHasWide = 1, kIllFormed = 2;
  std::vector<std::array<uint64_t, 2>> sub_ascii_;
  std::vector<uint8_t> sub_flags_;
};

}  // namespace infer::grammar
