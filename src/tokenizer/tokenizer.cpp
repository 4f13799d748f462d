// Tokenizer built from a GGUF vocabulary: special-token splitting, then SPM, byte-level BPE or
// WordPiece per text fragment; detokenisation through a per-token piece table built at load.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#include "tokenizer/bpe_encoder.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"
#include "tokenizer/wordpiece_encoder.h"

namespace infer::tokenizer {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // ▁

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0;;) {
    const size_t at = text.find(from, pos);
    if (at == std::string_view::npos) {
      out.append(text.substr(pos));
      return out;
    }
    out.append(text.substr(pos, at - pos));
    out.append(to);
    pos = at + from.size();
  }
}

// Text of a byte-level BPE entry with each stand-in character turned back into its byte; characters
// outside the table (added tokens typed as Normal) pass through as UTF-8.
std::string unmap_bytes(std::string_view text) {
  std::string out;
  for (uint32_t cp : utf8::decode(text)) {
    if (auto b = unicode_to_byte(cp)) out += static_cast<char>(*b);
    else utf8::append(out, cp);
  }
  return out;
}

// llama.cpp's clean-up of detokenised text: " ?"/" !"/" ."/" ," lose the space, a lone " ' "
// loses both, and " 's" " 'm" " 're" " 've" lose the space.
std::string clean_up_spaces(const std::string& text) {
  std::string a;
  for (size_t i = 0; i < text.size(); ++i) {
    const char x = text[i];
    if (i > 0 && text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a += x;
  }
  std::string b;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      b += x;
      a[++i] = '\0';  // drop the space after it; a following "' " then no longer sees a space before it
      continue;
    }
    b += x;
  }
  std::string c;
  for (size_t i = 0; i < b.size(); ++i) {
    const char x = b[i];
    if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c.pop_back();
    }
    c += x;
  }
  return c;
}

class VocabTokenizer final : public Tokenizer {
 public:
  explicit VocabTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
    if (vocab_.kind == VocabKind::Bpe) pre_ = std::make_unique<PreTokenizer>(vocab_.pre.patterns);
    build_pieces();
    // SPM's text has ▁ (3 bytes) for a space, BPE's a 1-2 byte stand-in per byte: an entry's length in
    // bytes bounds the input it covers. A character missing from the vocabulary (at most 4 bytes)
    // becomes byte or unknown tokens of one byte each.
    max_token_bytes_ = 4;
    for (const TokenEntry& t : vocab_.tokens) max_token_bytes_ = std::max(max_token_bytes_, t.text.size());
    for (TokenId id : vocab_.special_tokens) strips_ |= vocab_.tokens[id].lstrip || vocab_.tokens[id].rstrip;
  }

  size_t min_tokens(std::string_view text, const EncodeOptions&) const override {
    if (vocab_.kind == VocabKind::WordPiece) return 0;
    size_t counted = text.size();
    if (strips_)
      for (char c : text) counted -= std::isspace(static_cast<unsigned char>(c)) != 0;  // as special_split strips
    return counted / max_token_bytes_;
  }

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& opts) const override {
    bool complete = true;
    return encode_at_most(text, SIZE_MAX, opts, &complete);
  }

  std::vector<TokenId> encode_at_most(std::string_view text, size_t max_tokens, const EncodeOptions& opts,
                                      bool* complete) const override {
    std::vector<TokenId> out;
    if (opts.add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
    const auto fragments = split_on_special_tokens(vocab_, text, opts.parse_special);
    Limit limit{max_tokens};
    switch (vocab_.kind) {
      case VocabKind::Spm: encode_spm(fragments, opts, limit, out); break;
      case VocabKind::Bpe: encode_bpe(fragments, limit, out); break;
      case VocabKind::WordPiece: encode_wordpiece(fragments, limit, out); break;
    }
    *complete = !limit.stopped;
    if (limit.stopped) return out;
    if (opts.add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
    if (opts.add_special && vocab_.add_sep && vocab_.sep >= 0) out.push_back(vocab_.sep);
    return out;
  }

  std::string token_to_piece(TokenId id, bool remove_special) const override {
    check(id);
    const TokenType t = vocab_.tokens[id].type;
    if (remove_special && (t == TokenType::Control || t == TokenType::Unknown)) return {};
    return pieces_[id];
  }

  std::string decode(const std::vector<TokenId>& ids, bool remove_special) const override {
    size_t begin = 0, end = ids.size();
    if (remove_special && vocab_.add_bos && begin < end && ids[begin] == vocab_.bos) ++begin;
    if (remove_special && vocab_.add_eos && begin < end && ids[end - 1] == vocab_.eos) --end;
    if (remove_special && vocab_.add_sep && begin < end && ids[end - 1] == vocab_.sep) --end;
    const bool wordpiece = vocab_.kind == VocabKind::WordPiece;
    std::string out;
    bool strip_space = vocab_.kind == VocabKind::Spm && vocab_.add_space_prefix;
    for (size_t i = begin; i < end; ++i) {
      std::string piece = token_to_piece(ids[i], remove_special);
      if (strip_space && !piece.empty() && piece.front() == ' ') piece.erase(0, 1);
      strip_space = false;
      // A shown [UNK] or [SEP] is a word of its own, not glued to the word before it.
      if (wordpiece && !piece.empty() && vocab_.tokens[ids[i]].type != TokenType::Normal) piece.insert(0, 1, ' ');
      out += piece;
    }
    if (vocab_.clean_spaces) out = clean_up_spaces(out);
    if (wordpiece && !out.empty() && out.front() == ' ') out.erase(0, 1);  // every word starts with one
    return out;
  }

  int n_vocab() const override { return vocab_.n_vocab(); }
  const std::string& token_text(TokenId id) const override {
    check(id);
    return vocab_.tokens[id].text;
  }
  TokenType token_type(TokenId id) const override {
    check(id);
    return vocab_.tokens[id].type;
  }
  TokenId bos() const override { return vocab_.bos; }
  TokenId eos() const override { return vocab_.eos; }
  TokenId eot() const override { return vocab_.eot; }
  TokenId unk() const override { return vocab_.unk; }
  bool add_eos() const override { return vocab_.add_eos; }
  TokenId find_token(std::string_view text) const override { return vocab_.find(text); }
  bool is_eog(TokenId id) const override { return id >= 0 && id < vocab_.n_vocab() && vocab_.eog[id]; }
  bool add_bos() const override { return vocab_.add_bos; }
  std::string model_name() const override { return vocab_.model_name; }
  std::string pre_tokenizer() const override { return vocab_.pre.name; }
  bool pre_tokenizer_unknown() const override { return vocab_.pre_unknown; }
  uint64_t fingerprint() const override { return vocab_.fingerprint; }
  const std::string& chat_template() const override { return vocab_.chat_template; }
  const std::vector<std::pair<std::string, std::string>>& named_chat_templates() const override {
    return vocab_.named_chat_templates;
  }

 private:
  void check(TokenId id) const {
    if (id < 0 || id >= vocab_.n_vocab())
      throw std::out_of_range("tokenizer: token id " + std::to_string(id) + " is outside [0, " +
                              std::to_string(vocab_.n_vocab()) + ")");
  }

  // encode_at_most's bound: the encoders ask before each piece of work they can skip exactly.
  struct Limit {
    size_t max_tokens;
    bool stopped = false;  // work was skipped
    bool reached(const std::vector<TokenId>& out) {
      stopped = out.size() > max_tokens;
      return stopped;
    }
  };

  void encode_spm(const std::vector<Fragment>& fragments, const EncodeOptions& opts, Limit& limit,
                  std::vector<TokenId>& out) const {
    bool prev_special = !opts.continuation;  // the dummy prefix goes at the start and after each special token
    std::string piece;
    for (const auto& f : fragments) {
      if (limit.reached(out)) return;
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      piece.clear();
      if (vocab_.add_space_prefix && prev_special) piece += ' ';
      piece.append(f.text);
      spm_encode(vocab_, replace_all(piece, " ", kSpmSpace), out);
      prev_special = false;
    }
  }

  void encode_bpe(const std::vector<Fragment>& fragments, Limit& limit, std::vector<TokenId>& out) const {
    BpeEncoder bpe(vocab_);
    for (const auto& f : fragments) {
      if (limit.reached(out)) return;
      if (f.token >= 0) {
        out.push_back(f.token);
        continue;
      }
      const std::string clean = utf8::sanitize(f.text);
      // Words are encoded independently (merges never cross them): a prefix of words is exact.
      for (const auto& [begin, end] : pre_->split(clean)) {
        if (limit.reached(out)) return;
        bpe.encode_word(bytes_to_unicode_text(std::string_view(clean).substr(begin, end - begin)), out);
      }
    }
  }

  void encode_wordpiece(const std::vector<Fragment>& fragments, Limit& limit, std::vector<TokenId>& out) const {
    for (const auto& f : fragments) {
      if (limit.reached(out)) return;
      if (f.token >= 0) out.push_back(f.token);
      else wordpiece_encode(vocab_, f.text, out);
    }
  }

  // Output text of every token as if special tokens were shown (llama.cpp's piece cache).
  void build_pieces() {
    pieces_.resize(vocab_.tokens.size());
    for (size_t id = 0; id < vocab_.tokens.size(); ++id) {
      const TokenEntry& t = vocab_.tokens[id];
      switch (t.type) {
        case TokenType::Control:
        case TokenType::Unknown:
        case TokenType::UserDefined:
          pieces_[id] = t.text;
          break;
        case TokenType::Normal:
          pieces_[id] = vocab_.kind == VocabKind::Bpe ? unmap_bytes(t.text) : replace_all(t.text, kSpmSpace, " ");
          break;
        case TokenType::Byte:
          if (vocab_.kind == VocabKind::Spm && t.text.size() == 6 && t.text.compare(0, 3, "<0x") == 0)
            pieces_[id] = std::string(1, static_cast<char>(std::strtoul(t.text.substr(3, 2).c_str(), nullptr, 16)));
          break;
        default:  // Unused and Undefined render empty, like Control tokens
          break;
      }
    }
  }

  Vocab vocab_;
  size_t max_token_bytes_ = 4;  // the most bytes of text one token covers (min_tokens)
  bool strips_ = false;         // some special token strips the whitespace beside it
  std::unique_ptr<PreTokenizer> pre_;
  std::vector<std::string> pieces_;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  return std::make_unique<VocabTokenizer>(load_vocab(file));
}

}  // namespace infer::tokenizer
