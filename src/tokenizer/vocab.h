// The vocabulary as read from a GGUF file: token texts, scores and types, BPE merge ranks, special
// ids and flags, the end-of-generation set and the fingerprint. Loading applies llama.cpp's rules
// (spec/architectures.md §6): per-model defaults, id keys that override them, text-based detection of
// EOT/EOM/FIM tokens, the EOG set, and the special-token list used to split text.
// Thread-safety: immutable after load_vocab(); lookups may run concurrently.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/file.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece_split.h"

namespace infer::tokenizer {

enum class VocabKind { Spm, Bpe, WordPiece };

struct TokenEntry {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::Normal;  // effective type after load-time fix-ups (EOG → Control ...)
  bool lstrip = false;                 // whitespace left of this special token is dropped when splitting
  bool rstrip = false;                 // whitespace right of it is dropped
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  VocabKind kind = VocabKind::Spm;
  std::string model_name;     // tokenizer.ggml.model
  std::string pre_name_file;  // tokenizer.ggml.pre as written ("" when absent)
  PreTokenizerSpec pre;       // BPE only; name "default" for SPM
  bool pre_unknown = false;

  std::vector<TokenEntry> tokens;
  std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> id_of_text;  // last id wins
  // Merge "A B" (as stored) → rank; A never holds a space after its first byte.
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> merge_rank;

  TokenId bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1;
  TokenId fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_sep = false;  // WordPiece: [SEP] closes every add_special encoding
  bool add_space_prefix = false;
  bool clean_spaces = true;
  bool ignore_merges = false;
  WordPieceNormalizer wordpiece;  // WordPiece only
  size_t max_token_len = 0;       // WordPiece only: longest token text in bytes

  std::vector<bool> eog;                // indexed by id
  std::vector<TokenId> special_tokens;  // Control/UserDefined/Unknown, longest text first
  std::string chat_template;
  // tokenizer.chat_template.<name> (e.g. tool_use): name → template text, in file order.
  std::vector<std::pair<std::string, std::string>> named_chat_templates;
  uint64_t fingerprint = 0;

  int n_vocab() const { return static_cast<int>(tokens.size()); }
  TokenId find(std::string_view text) const {
    auto it = id_of_text.find(text);
    return it == id_of_text.end() ? -1 : it->second;
  }
};

// Reads and checks every tokenizer key; throws std::runtime_error naming the key on bad data.
Vocab load_vocab(const gguf::File& file);

// FNV-1a 64 over the vocabulary's defining data; the exact byte sequence is documented in tokenizer.h.
uint64_t vocab_fingerprint(std::string_view model_name, std::string_view pre_name_file,
                           const std::vector<std::string_view>& texts, const std::vector<int32_t>& types,
                           const std::vector<std::string_view>& merges);

}  // namespace infer::tokenizer
