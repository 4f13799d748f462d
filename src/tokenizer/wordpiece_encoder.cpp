#include "tokenizer/wordpiece_encoder.h"

#include <algorithm>
#include <stdexcept>

#include "tokenizer/wordpiece_split.h"

namespace infer::tokenizer {
namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // ▁

// `key` is "▁" + word; its pieces' ids, or [UNK] when some position matches nothing.
void encode_word(const Vocab& vocab, std::string_view key, std::vector<TokenId>& out) {
  const size_t first = out.size();
  for (size_t pos = 0; pos < key.size();) {
    TokenId id = -1;
    size_t len = std::min(vocab.max_token_len, key.size() - pos);
    for (; len > 0; --len)
      if ((id = vocab.find(key.substr(pos, len))) >= 0) break;
    if (id < 0) {
      if (vocab.unk < 0)
        throw std::runtime_error("tokenizer: word '" + std::string(key.substr(kWordStart.size())) +
                                 "' has no WordPiece split and the vocabulary has no [UNK] token");
      out.resize(first);
      out.push_back(vocab.unk);
      return;
    }
    out.push_back(id);
    pos += len;
  }
}

}  // namespace

void wordpiece_encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
  std::string key;
  for (const std::string& word : wordpiece_split(text, vocab.wordpiece)) {
    key.assign(kWordStart);
    key.append(word);
    encode_word(vocab, key, out);
  }
}

}  // namespace infer::tokenizer
