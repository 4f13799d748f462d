// Byte-level BPE encoding of one word (llama.cpp's BPE algorithm): the word's bytes, already mapped
// to GPT-2's byte-unicode characters, start as UTF-8 characters; the adjacent pair with the lowest
// merge rank (ties: leftmost) is merged until no pair has a rank. With `ignore_merges`, a word that is
// itself a vocab entry is taken whole. A final piece missing from the vocab is emitted byte by byte
// (bytes without a token are dropped, as llama.cpp does).
#pragma once
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace infer::tokenizer {

// Reusable scratch for one encode call (not shared between threads).
class BpeEncoder {
 public:
  explicit BpeEncoder(const Vocab& vocab) : vocab_(vocab) {}
  void encode_word(std::string_view word, std::vector<TokenId>& out);

 private:
  int32_t rank(std::string_view left, std::string_view right);

  const Vocab& vocab_;
  std::string key_;
};

}  // namespace infer::tokenizer
