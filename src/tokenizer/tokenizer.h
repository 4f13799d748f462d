// Text ↔ token ids from a GGUF file's vocabulary metadata (tokenizer.ggml.*), exact to llama.cpp:
// SentencePiece-style (`llama`) and byte-level BPE (`gpt2`, pre-tokenizer per tokenizer.ggml.pre).
// Thread-safety: immutable after construction; all const methods may run concurrently.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"

namespace infer::tokenizer {

using TokenId = int32_t;

enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct EncodeOptions {
  bool add_special = true;    // BOS/EOS as the vocab's add_bos_token / add_eos_token say
  bool parse_special = true;  // recognise control/user-defined token text like <|im_start|>
};

class Tokenizer {
 public:
  // Reads the vocabulary from `file`'s metadata; throws std::runtime_error on missing/invalid keys.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
  virtual ~Tokenizer() = default;

  virtual std::vector<TokenId> encode(std::string_view text, const EncodeOptions& opts = {}) const = 0;
  // Text of one token as it appears in output (byte tokens give their raw byte, ▁ → space ...).
  virtual std::string token_to_piece(TokenId id, bool remove_special = true) const = 0;
  // Detokenise a sequence; drops the leading space SentencePiece adds after BOS.
  virtual std::string decode(const std::vector<TokenId>& ids, bool remove_special = true) const = 0;

  virtual int n_vocab() const = 0;
  virtual const std::string& token_text(TokenId id) const = 0;  // raw vocab entry
  virtual TokenType token_type(TokenId id) const = 0;
  virtual TokenId bos() const = 0;  // -1 when none
  virtual TokenId eos() const = 0;
  virtual bool is_eog(TokenId id) const = 0;  // end of generation: eos, eot, <|im_end|>, <|eot_id|> ...
  virtual bool add_bos() const = 0;
  virtual std::string model_name() const = 0;     // "llama" / "gpt2"
  virtual std::string pre_tokenizer() const = 0;  // effective pre-tokenizer ("default" when absent)
  virtual bool pre_tokenizer_unknown() const = 0; // true when the file named one we do not know
  // Stable 64-bit hash of model type, pre-tokenizer, tokens, types and merges (DESIGN invariant 8).
  virtual uint64_t fingerprint() const = 0;
  // tokenizer.chat_template, empty when absent.
  virtual const std::string& chat_template() const = 0;
};

}  // namespace infer::tokenizer
