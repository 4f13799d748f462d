// Pre-tokenizers of byte-level BPE vocabularies: the regex list that splits text into words before
// merges, chosen by the `tokenizer.ggml.pre` name, plus the per-name flags llama.cpp attaches to it.
//
// Several regexes run in sequence: each one splits every current piece into its matches and the
// text between them (both kept), and a regex sees only the piece it splits (so `(?!\S)` stops at a
// piece's end). Regexes are PCRE2 with UTF and UCP, JIT-compiled once; `\s` is rewritten to the exact
// whitespace set llama.cpp uses.
// Thread-safety: immutable after construction; split() may run concurrently.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace infer::tokenizer {

struct PreTokenizerSpec {
  std::string name;                   // canonical name, e.g. "llama3" for "llama-bpe"
  std::vector<std::string> patterns;  // applied in order
  bool ignore_merges = false;         // a word that is a whole vocab entry is taken as is
  bool add_bos = false;               // default for add_bos_token when the file has no key
  bool clean_spaces = true;           // decode() drops the space before . , ! ? and some contractions
};

// The spec for a `tokenizer.ggml.pre` value; nullopt when the name is not known.
std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name);

class PreTokenizer {
 public:
  // Compiles the patterns; throws std::runtime_error naming the pattern and PCRE2's message.
  explicit PreTokenizer(const std::vector<std::string>& patterns);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits valid UTF-8 `text` into words, returned as [begin, end) byte ranges covering all of it.
  std::vector<std::pair<size_t, size_t>> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace infer::tokenizer
