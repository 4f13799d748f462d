// Splits text on the literal text of special tokens before the regular tokenizer runs
// (llama.cpp's partitioning): special tokens are taken longest first; each one cuts every remaining
// text fragment at each of its occurrences. User-defined tokens are always matched; Control and
// Unknown ones only when `parse_special` is on.
#pragma once
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace infer::tokenizer {

struct Fragment {
  TokenId token = -1;     // >= 0: a special token; -1: raw text
  std::string_view text;  // raw text (a view into the input) when token < 0
};

std::vector<Fragment> split_on_special_tokens(const Vocab& vocab, std::string_view text, bool parse_special);

}  // namespace infer::tokenizer
