#include "tokenizer/spm_encoder.h"

#include <optional>
#include <stdexcept>

#include "tokenizer/symbol_merge.h"

namespace infer::tokenizer {

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
  const auto pair_priority = [&vocab](std::string_view left, std::string_view right) -> std::optional<float> {
    const TokenId id = vocab.find(std::string_view(left.data(), left.size() + right.size()));
    return id >= 0 ? std::optional<float>(vocab.tokens[id].score) : std::nullopt;
  };
  // Merged pieces are vocab entries by construction; only single characters can be missing.
  merge_symbols(text, pair_priority, [&vocab, &out](std::string_view piece) {
    if (TokenId id = vocab.find(piece); id >= 0) {
      out.push_back(id);
    } else {
      for (char c : piece) out.push_back(spm_byte_token(vocab, static_cast<uint8_t>(c)));
    }
  });
}

}  // namespace infer::tokenizer
