// WordPiece encoding (llama.cpp's WPM algorithm, spec/architectures-more.md §4.5): the words of
// wordpiece_split() are matched greedily against the vocabulary, which stores word-initial pieces
// with a leading "▁" and continuation pieces bare (the converter dropped BERT's "##"). Each word is
// looked up as "▁" + word: at each byte position the longest vocab entry (at most max_token_len
// bytes) starting there is taken; when some position has none, the whole word becomes [UNK].
#pragma once
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace infer::tokenizer {

// Appends the ids of raw text `text` (no special-token text in it) to `out`. Throws
// std::runtime_error when a word needs [UNK] and the vocabulary has none.
void wordpiece_encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out);

}  // namespace infer::tokenizer
