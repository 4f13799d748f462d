// Text ↔ token ids from a GGUF file's vocabulary metadata (tokenizer.ggml.*), exact to llama.cpp:
// SentencePiece-style (`llama`), byte-level BPE (`gpt2`, pre-tokenizer per tokenizer.ggml.pre) and
// WordPiece (`bert`, BERT's normalisation and greedy longest match).
// Thread-safety: immutable after construction; all const methods may run concurrently.
//
// Files: vocab.* (keys, defaults, special ids, EOG set, fingerprint), pre_tokenizer.* (regexes per
// tokenizer.ggml.pre), special_split.* (special-token text), spm_encoder.*, bpe_encoder.*,
// wordpiece_split.* (BERT normalisation into words), wordpiece_encoder.*, byte_unicode.*, utf8.*;
// token_blob.* (ids in Redis values) and chat_template.* (prompt formats).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/file.h"

namespace infer::tokenizer {

using TokenId = int32_t;

enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct EncodeOptions {
  bool add_special = true;    // BOS/EOS as the vocab's add_bos_token / add_eos_token say; WordPiece:
                              // always [CLS] first and [SEP] last
  bool parse_special = true;  // recognise control/user-defined token text like <|im_start|>
  bool continuation = false;  // the text continues earlier text (pieces assembled by id): SPM adds no
                              // dummy-prefix space at its start (it still does after special tokens)
};

class Tokenizer {
 public:
  // Reads the vocabulary from `file`'s metadata; throws std::runtime_error on missing/invalid keys.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
  virtual ~Tokenizer() = default;

  // Token ids of `text` (any bytes). SPM adds the dummy-prefix space at the start and after each
  // special token, and falls back to <0xXX> byte tokens. BPE replaces invalid UTF-8 by U+FFFD before
  // splitting (llama.cpp does the same), so such input does not round-trip. WordPiece lowercases,
  // strips accents and drops invalid UTF-8 and control characters (wordpiece_split.h), and gives a
  // word it cannot split [UNK]; its text does not round-trip either.
  virtual std::vector<TokenId> encode(std::string_view text, const EncodeOptions& opts = {}) const = 0;
  // encode() that stops once it has more than max_tokens ids, at the first boundary it can stop at
  // exactly (a word for BPE, a special token for every vocabulary), so that a text too long for a
  // context is not tokenised whole: *complete false means the result is a prefix of encode()'s, longer
  // than max_tokens; true that it is all of it (whatever its length).
  virtual std::vector<TokenId> encode_at_most(std::string_view text, size_t max_tokens, const EncodeOptions& opts,
                                              bool* complete) const = 0;
  // A lower bound on encode(text, opts).size(), found without encoding, so that a text that cannot
  // fit a context is refused before the work: no token covers more bytes of text than the longest
  // vocabulary entry has (a special token also the whitespace it strips: then only the other bytes
  // count, a scan of text; otherwise O(1)). 0 for WordPiece, which drops characters.
  virtual size_t min_tokens(std::string_view text, const EncodeOptions& opts = {}) const = 0;
  // Text of one token as it appears in output (byte tokens give their raw byte, ▁ → space ...).
  // With remove_special, Control/Unknown tokens give "" (otherwise their text). Throws
  // std::out_of_range for an id outside [0, n_vocab).
  virtual std::string token_to_piece(TokenId id, bool remove_special = true) const = 0;
  // Detokenise a sequence as llama.cpp does: with remove_special, a leading BOS and a trailing EOS
  // (when the vocab adds them) are dropped and Control tokens render empty; SentencePiece vocabs drop
  // the leading space of the first piece (the dummy prefix); vocabs with clean-up (SPM, gpt-2,
  // WordPiece ...) remove the space before . , ! ? and before 's 'm 're 've. WordPiece: a word-initial
  // piece ("▁x") starts a new word with a space, a continuation piece is glued to the one before it,
  // a shown special token is a word of its own, and the text's leading space is dropped; with
  // remove_special a leading [CLS] and a trailing [SEP] are dropped. Throws std::out_of_range on a
  // bad id.
  virtual std::string decode(const std::vector<TokenId>& ids, bool remove_special = true) const = 0;

  virtual int n_vocab() const = 0;
  virtual const std::string& token_text(TokenId id) const = 0;  // raw vocab entry
  virtual TokenType token_type(TokenId id) const = 0;
  virtual TokenId bos() const = 0;  // -1 when none
  virtual TokenId eos() const = 0;
  virtual TokenId eot() const = 0;  // end of turn (key or detected by text); -1 when none
  virtual TokenId unk() const = 0;
  virtual bool add_eos() const = 0;
  // Id of the vocab entry whose raw text is exactly `text`; -1 when none.
  virtual TokenId find_token(std::string_view text) const = 0;
  virtual bool is_eog(TokenId id) const = 0;  // end of generation: eos, eot, <|im_end|>, <|eot_id|> ...
  virtual bool add_bos() const = 0;
  virtual std::string model_name() const = 0;     // "llama" / "gpt2" / "bert"
  virtual std::string pre_tokenizer() const = 0;  // effective pre-tokenizer ("default" when absent, SPM, WordPiece)
  virtual bool pre_tokenizer_unknown() const = 0; // true when the file named one we do not know
  // Stable 64-bit hash of the vocabulary (DESIGN invariant 8), stored in token blobs: it must never
  // change. Definition: FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over
  //   F("redis-infer vocab v1") F(tokenizer.ggml.model) F(tokenizer.ggml.pre or "" when absent)
  //   U(n_vocab) then per token: F(text as stored in the file) U(token_type as stored, as u32; 1 when
  //   the key is absent); then U(n_merges) and F(merge) for each tokenizer.ggml.merges entry;
  // where U(x) is x as 8 little-endian bytes and F(s) is U(byte length) followed by the bytes.
  // Scores are left out: they change how text splits, not what an id means.
  virtual uint64_t fingerprint() const = 0;
  // tokenizer.chat_template, empty when absent.
  virtual const std::string& chat_template() const = 0;
  // The named variants, tokenizer.chat_template.<name> (e.g. "tool_use"): (name, text) in file order.
  virtual const std::vector<std::pair<std::string, std::string>>& named_chat_templates() const = 0;
};

}  // namespace infer::tokenizer
