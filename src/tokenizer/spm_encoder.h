// SentencePiece-style encoding of one text fragment (llama.cpp's SPM algorithm): start from UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the vocab entry with the
// highest score (ties: leftmost), then emit each final piece; a piece not in the vocab is emitted as
// its byte tokens <0xXX>. The caller has already replaced spaces by ▁ and added the dummy prefix.
#pragma once
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace infer::tokenizer {

void spm_encode(const Vocab& vocab, std::string_view escaped_text, std::vector<TokenId>& out);

// Token for one raw byte: <0xXX>, else the one-character token, else unk; throws when none exists.
TokenId spm_byte_token(const Vocab& vocab, uint8_t byte);

}  // namespace infer::tokenizer
