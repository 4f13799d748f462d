#include "tokenizer/special_split.h"

#include <cctype>

namespace infer::tokenizer {

std::vector<Fragment> split_on_special_tokens(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, text});
  std::vector<Fragment> next;
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  for (TokenId id : vocab.special_tokens) {
    const TokenEntry& special = vocab.tokens[id];
    if (!parse_special && special.type != TokenType::UserDefined) continue;
    const std::string_view needle = special.text;
    bool found_any = false;
    for (const auto& f : fragments)
      if (f.token < 0 && f.text.find(needle) != std::string_view::npos) found_any = true;
    if (!found_any) continue;

    next.clear();
    for (const auto& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t at; (at = rest.find(needle)) != std::string_view::npos;) {
        std::string_view left = rest.substr(0, at);
        if (special.lstrip)
          while (!left.empty() && is_space(left.back())) left.remove_suffix(1);
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({id, {}});
        rest = rest.substr(at + needle.size());
        if (special.rstrip)
          while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace infer::tokenizer
