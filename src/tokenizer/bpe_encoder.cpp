#include "tokenizer/bpe_encoder.h"

#include <optional>

#include "tokenizer/symbol_merge.h"

namespace infer::tokenizer {

int32_t BpeEncoder::rank(std::string_view left, std::string_view right) {
  // Merges are stored as "A B" split at the first space after byte 0, so A has no later space.
  if (left.find(' ', 1) != std::string_view::npos) return -1;
  key_.assign(left);
  key_ += ' ';
  key_ += right;
  auto it = vocab_.merge_rank.find(std::string_view(key_));
  return it == vocab_.merge_rank.end() ? -1 : it->second;
}

void BpeEncoder::encode_word(std::string_view word, std::vector<TokenId>& out) {
  if (word.empty()) return;
  if (vocab_.ignore_merges) {
    if (TokenId id = vocab_.find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // Lower merge rank merges first, so the rank is negated into a priority.
  const auto pair_priority = [this](std::string_view left, std::string_view right) -> std::optional<int32_t> {
    const int32_t found = rank(left, right);
    return found >= 0 ? std::optional<int32_t>(-found) : std::nullopt;
  };
  merge_symbols(word, pair_priority, [this, &out](std::string_view piece) {
    if (TokenId id = vocab_.find(piece); id >= 0) {
      out.push_back(id);
      return;
    }
    for (const char& c : piece)
      if (TokenId id = vocab_.find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
  });
}

}  // namespace infer::tokenizer
