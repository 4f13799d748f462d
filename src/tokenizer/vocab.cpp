#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>

namespace infer::tokenizer {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("tokenizer: " + what); }

void warn(const std::string& what) { std::fprintf(stderr, "tokenizer: warning: %s\n", what.c_str()); }

const gguf::Value& require_array(const gguf::File& file, std::string_view key) {
  const gguf::Value* v = file.find(key);
  if (!v) fail("missing key " + std::string(key));
  if (!v->is_array()) fail("key " + std::string(key) + " is not an array");
  return *v;
}

TokenType type_from_int(int64_t v) {
  return v >= 0 && v <= 6 ? static_cast<TokenType>(v) : TokenType::Undefined;
}

// Reads an id key into `id` when present and in range (spec §6.1 special-token id rule).
void read_id(const gguf::File& file, std::string_view key, int n_vocab, TokenId& id) {
  const gguf::Value* v = file.find(key);
  if (!v) return;
  if (!v->is_integer()) fail("key " + std::string(key) + " is not an integer");
  const int64_t value = v->type == gguf::ValueType::UINT64 || v->type == gguf::ValueType::UINT32
                            ? static_cast<int64_t>(std::min<uint64_t>(v->as_uint(), INT64_MAX))
                            : v->as_int();
  if (value < 0 || value >= n_vocab) {
    if (value == UINT32_MAX) return;  // converters write 0xFFFFFFFF for "none": not worth a warning
    warn(std::string(key) + " = " + std::to_string(value) + " is not a token id (n_vocab " +
         std::to_string(n_vocab) + "); ignored");
    return;
  }
  id = static_cast<TokenId>(value);
}

// First token (in list order) whose text is one of `texts`; -1 when none.
TokenId find_any(const Vocab& vocab, std::initializer_list<std::string_view> texts) {
  for (auto t : texts)
    if (TokenId id = vocab.find(t); id >= 0) return id;
  return -1;
}

void make_control(Vocab& vocab, TokenId id) { vocab.tokens[id].type = TokenType::Control; }

// Detects an id by text when its key was absent; such a token becomes Control (llama.cpp).
void detect_by_text(Vocab& vocab, TokenId& id, std::initializer_list<std::string_view> texts) {
  if (id >= 0) return;
  id = find_any(vocab, texts);
  if (id >= 0) make_control(vocab, id);
}

VocabKind kind_of_model(const std::string& model_name) {
  if (model_name == "llama") return VocabKind::Spm;
  if (model_name == "gpt2") return VocabKind::Bpe;
  if (model_name == "bert") return VocabKind::WordPiece;
  fail("tokenizer.ggml.model '" + model_name + "' is not supported (only 'llama', 'gpt2' and 'bert')");
}

// Byte-level BPE takes its flags from the pre-tokenizer named by tokenizer.ggml.pre.
void set_bpe_pre_tokenizer(Vocab& vocab) {
  std::string pre_name = vocab.pre_name_file;
  if (pre_name.empty()) {
    warn("tokenizer.ggml.pre is missing; using the 'default' pre-tokenizer");
    pre_name = "default";
  }
  if (auto spec = find_pre_tokenizer(pre_name)) {
    vocab.pre = std::move(*spec);
  } else {
    warn("unknown pre-tokenizer '" + pre_name + "' (tokenizer.ggml.pre); using 'gpt-2'");
    vocab.pre = *find_pre_tokenizer("gpt-2");
    vocab.pre_unknown = true;
  }
  vocab.add_bos = vocab.pre.add_bos;
  vocab.clean_spaces = vocab.pre.clean_spaces;
  vocab.ignore_merges = vocab.pre.ignore_merges;
}

// llama.cpp's per-model special ids and flags, before the file's keys override them.
void set_model_defaults(Vocab& vocab) {
  switch (vocab.kind) {
    case VocabKind::Spm:
      vocab.bos = 1, vocab.eos = 2, vocab.unk = 0;
      vocab.add_bos = true;
      vocab.add_space_prefix = true;
      vocab.pre = PreTokenizerSpec{"default", {}, false, true, true};
      break;
    case VocabKind::Bpe:
      vocab.bos = 11, vocab.eos = 11;
      set_bpe_pre_tokenizer(vocab);
      break;
    case VocabKind::WordPiece:  // BERT's [CLS] is the bos id; WordPiece ignores tokenizer.ggml.pre
      vocab.bos = 101, vocab.sep = 102, vocab.unk = 100, vocab.pad = 0;
      vocab.pre = PreTokenizerSpec{"default", {}, false, true, true};
      break;
  }
}

// The normaliser switches, the longest token, and the [CLS] ... [SEP] framing, which llama.cpp's
// WordPiece path adds with add_special whatever add_bos_token / add_eos_token say.
void read_wordpiece_keys(const gguf::File& file, Vocab& vocab) {
  vocab.wordpiece.lowercase = file.get_bool("tokenizer.ggml.normalizer.lowercase", true);
  vocab.wordpiece.strip_accents = file.get_bool("tokenizer.ggml.normalizer.strip_accents", true);
  vocab.add_bos = true;
  vocab.add_eos = false;
  vocab.add_sep = true;
  for (const TokenEntry& t : vocab.tokens) vocab.max_token_len = std::max(vocab.max_token_len, t.text.size());
}

constexpr std::string_view kDeepseekEos = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";

class Fnv1a64 {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) {
      hash_ ^= p[i];
      hash_ *= 0x100000001b3ULL;
    }
  }
  void u64(uint64_t v) {
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
    bytes(le, 8);
  }
  void field(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

uint64_t vocab_fingerprint(std::string_view model_name, std::string_view pre_name_file,
                           const std::vector<std::string_view>& texts, const std::vector<int32_t>& types,
                           const std::vector<std::string_view>& merges) {
  Fnv1a64 h;
  h.field("redis-infer vocab v1");
  h.field(model_name);
  h.field(pre_name_file);
  h.u64(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    h.field(texts[i]);
    h.u64(static_cast<uint64_t>(static_cast<uint32_t>(types[i])));
  }
  h.u64(merges.size());
  for (const auto& m : merges) h.field(m);
  return h.value();
}

namespace {

// Tokens, scores and types; `texts` and `declared_types` (views into `file`, which outlives the load)
// are kept for the fingerprint.
void read_tokens(const gguf::File& file, Vocab& vocab, std::vector<std::string_view>& texts,
                 std::vector<int32_t>& declared_types) {
  const auto& token_values = require_array(file, "tokenizer.ggml.tokens").as_array();
  if (token_values.empty()) fail("tokenizer.ggml.tokens is empty");
  if (token_values.size() > static_cast<size_t>(INT32_MAX)) fail("tokenizer.ggml.tokens is too large");
  const int n_vocab = static_cast<int>(token_values.size());
  const gguf::Value* scores = file.find("tokenizer.ggml.scores");
  const gguf::Value* types = file.find("tokenizer.ggml.token_type");
  if (scores && (!scores->is_array() || scores->array_size() < token_values.size()))
    fail("tokenizer.ggml.scores must be an array of at least " + std::to_string(n_vocab) + " entries");
  if (types && (!types->is_array() || types->array_size() < token_values.size()))
    fail("tokenizer.ggml.token_type must be an array of at least " + std::to_string(n_vocab) + " entries");

  texts.assign(n_vocab, {});
  declared_types.assign(n_vocab, static_cast<int32_t>(TokenType::Normal));
  vocab.tokens.resize(n_vocab);
  vocab.id_of_text.reserve(n_vocab);
  for (int id = 0; id < n_vocab; ++id) {
    if (!token_values[id].is_string()) fail("tokenizer.ggml.tokens[" + std::to_string(id) + "] is not a string");
    texts[id] = token_values[id].as_string();
    TokenEntry& t = vocab.tokens[id];
    t.text = texts[id].empty() ? "[EMPTY_" + std::to_string(id) + "]" : std::string(texts[id]);
    if (scores) t.score = static_cast<float>(scores->as_array()[id].as_float());
    if (types) declared_types[id] = static_cast<int32_t>(types->as_array()[id].as_int());
    t.type = type_from_int(declared_types[id]);
    vocab.id_of_text[t.text] = id;
  }
}

// BPE merges (required for gpt2 vocabularies), ranked; returns them as listed, for the fingerprint.
std::vector<std::string_view> read_merges(const gguf::File& file, Vocab& vocab) {
  std::vector<std::string_view> merges;
  if (const gguf::Value* m = file.find("tokenizer.ggml.merges")) {
    if (!m->is_array()) fail("tokenizer.ggml.merges is not an array");
    merges.reserve(m->array_size());
    for (const auto& v : m->as_array()) {
      if (!v.is_string()) fail("tokenizer.ggml.merges[" + std::to_string(merges.size()) + "] is not a string");
      merges.push_back(v.as_string());
    }
  } else if (vocab.kind == VocabKind::Bpe) {
    fail("missing key tokenizer.ggml.merges (required for gpt2 vocabularies)");
  }
  vocab.merge_rank.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    if (merges[i].find(' ', 1) == std::string_view::npos) continue;  // no pair: can never apply
    vocab.merge_rank.try_emplace(std::string(merges[i]), static_cast<int32_t>(i));
  }
  return merges;
}

// Special ids: the model family's defaults, then the file's keys.
void read_special_ids(const gguf::File& file, Vocab& vocab) {
  const int n_vocab = static_cast<int>(vocab.tokens.size());
  set_model_defaults(vocab);
  for (TokenId* id : {&vocab.bos, &vocab.eos, &vocab.unk, &vocab.sep, &vocab.pad})
    if (*id >= n_vocab) *id = -1;

  read_id(file, "tokenizer.ggml.bos_token_id", n_vocab, vocab.bos);
  read_id(file, "tokenizer.ggml.eos_token_id", n_vocab, vocab.eos);
  read_id(file, "tokenizer.ggml.eot_token_id", n_vocab, vocab.eot);
  read_id(file, "tokenizer.ggml.eom_token_id", n_vocab, vocab.eom);
  read_id(file, "tokenizer.ggml.unknown_token_id", n_vocab, vocab.unk);
  read_id(file, "tokenizer.ggml.seperator_token_id", n_vocab, vocab.sep);
  read_id(file, "tokenizer.ggml.padding_token_id", n_vocab, vocab.pad);
  read_id(file, "tokenizer.ggml.fim_pre_token_id", n_vocab, vocab.fim_pre);
  read_id(file, "tokenizer.ggml.fim_suf_token_id", n_vocab, vocab.fim_suf);
  read_id(file, "tokenizer.ggml.fim_mid_token_id", n_vocab, vocab.fim_mid);
  read_id(file, "tokenizer.ggml.fim_pad_token_id", n_vocab, vocab.fim_pad);
  read_id(file, "tokenizer.ggml.fim_rep_token_id", n_vocab, vocab.fim_rep);
  read_id(file, "tokenizer.ggml.fim_sep_token_id", n_vocab, vocab.fim_sep);
  read_id(file, "tokenizer.ggml.prefix_token_id", n_vocab, vocab.fim_pre);
  read_id(file, "tokenizer.ggml.suffix_token_id", n_vocab, vocab.fim_suf);
  read_id(file, "tokenizer.ggml.middle_token_id", n_vocab, vocab.fim_mid);
  vocab.add_bos = file.get_bool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  vocab.add_eos = file.get_bool("tokenizer.ggml.add_eos_token", vocab.add_eos);
  vocab.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix", vocab.add_space_prefix);
  if (vocab.kind == VocabKind::WordPiece) read_wordpiece_keys(file, vocab);

}

// Text-based detection of ids the file does not name (spec §6.3).
void detect_special_ids_by_text(Vocab& vocab) {
  detect_by_text(vocab, vocab.eot,
                 {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
                  "_<EOT>", "[EOT]", kDeepseekEos, "<end_of_utterance>"});
  detect_by_text(vocab, vocab.eom, {"<|eom_id|>"});
  detect_by_text(vocab, vocab.fim_pre,
                 {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
                  "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>"});
  detect_by_text(vocab, vocab.fim_suf,
                 {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
                  "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>"});
  detect_by_text(vocab, vocab.fim_mid,
                 {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
                  "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>"});
  detect_by_text(vocab, vocab.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"});
  detect_by_text(vocab, vocab.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect_by_text(vocab, vocab.fim_sep, {"<|file_sep|>", "<file_sep>", "<|file_separator|>"});

}

// The end-of-generation set, and the types llama.cpp overrides on the way.
void mark_end_of_generation(Vocab& vocab) {
  const int n_vocab = static_cast<int>(vocab.tokens.size());
  vocab.eog.assign(n_vocab, false);
  for (TokenId id : {vocab.fim_pad, vocab.fim_rep, vocab.fim_sep})
    if (id >= 0) vocab.eog[id] = true;
  for (std::string_view text :
       {std::string_view("<|eot_id|>"), std::string_view("<|im_end|>"), std::string_view("<|end|>"),
        std::string_view("<|return|>"), std::string_view("<|call|>"), std::string_view("<|flush|>"),
        std::string_view("<|calls|>"), std::string_view("<end_of_turn>"), std::string_view("<|endoftext|>"),
        std::string_view("</s>"), std::string_view("<|eom_id|>"), std::string_view("<EOT>"), std::string_view("_<EOT>"),
        std::string_view("[EOT]"), std::string_view("[EOS]"), std::string_view("<|end_of_text|>"),
        std::string_view("<end_of_utterance>"), std::string_view("<eos>"), std::string_view("<turn|>"),
        std::string_view("<|tool_response>"), kDeepseekEos, std::string_view("[e~[")}) {
    if (TokenId id = vocab.find(text); id >= 0) {
      vocab.eog[id] = true;
      make_control(vocab, id);  // llama.cpp overrides the type of such tokens to Control
    }
  }
  for (TokenId id : {vocab.eos, vocab.eot, vocab.eom})
    if (id >= 0) vocab.eog[id] = true;
  // gpt-oss style: <|end|> ends a message, not the generation, when <|return|>/<|call|> exist.
  const TokenId end_id = vocab.find("<|end|>");
  const auto in_eog = [&](std::string_view t) { TokenId id = vocab.find(t); return id >= 0 && vocab.eog[id]; };
  if (end_id >= 0 && ((in_eog("<|return|>") && in_eog("<|call|>")) || (in_eog("<|calls|>") && in_eog("<|flush|>")))) {
    vocab.eog[end_id] = false;
    vocab.tokens[end_id].type = TokenType::UserDefined;
  }

  for (auto& t : vocab.tokens)
    if (t.type == TokenType::Control && t.text.find("unused") != std::string::npos) t.type = TokenType::Unused;

}

// The special tokens (longest first, for splitting text), and Phi-3's right-stripping of them.
void list_special_tokens(const gguf::File& file, Vocab& vocab) {
  const int n_vocab = static_cast<int>(vocab.tokens.size());
  // Phi-3 vocabularies strip whitespace right of their special tokens (llama.cpp, by model name).
  std::string general_name = file.get_string("general.name", "");
  std::transform(general_name.begin(), general_name.end(), general_name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool is_phi3 = general_name.find("phi-3") != std::string::npos || general_name.find("phi3") != std::string::npos;

  for (int id = 0; id < n_vocab; ++id) {
    const TokenType t = vocab.tokens[id].type;
    if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown)
      vocab.special_tokens.push_back(id);
  }
  if (is_phi3) {
    for (TokenId id : vocab.special_tokens) vocab.tokens[id].rstrip = true;
    if (TokenId id = vocab.find("</s>"); id >= 0) vocab.tokens[id].rstrip = true;
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"})
      if (TokenId id = vocab.find(t); id >= 0) vocab.tokens[id].rstrip = false;
  }
  std::stable_sort(vocab.special_tokens.begin(), vocab.special_tokens.end(), [&](TokenId a, TokenId b) {
    return vocab.tokens[a].text.size() > vocab.tokens[b].text.size();
  });

}

}  // namespace

Vocab load_vocab(const gguf::File& file) {
  Vocab vocab;
  vocab.model_name = file.get_string("tokenizer.ggml.model");
  vocab.kind = kind_of_model(vocab.model_name);
  std::vector<std::string_view> texts;
  std::vector<int32_t> declared_types;
  read_tokens(file, vocab, texts, declared_types);
  const std::vector<std::string_view> merges = read_merges(file, vocab);
  vocab.pre_name_file = file.get_string("tokenizer.ggml.pre", "");
  read_special_ids(file, vocab);
  detect_special_ids_by_text(vocab);
  mark_end_of_generation(vocab);
  list_special_tokens(file, vocab);
  vocab.chat_template = file.get_string("tokenizer.chat_template", "");
  constexpr std::string_view kNamedPrefix = "tokenizer.chat_template.";
  for (const auto& [key, value] : file.metadata())
    if (key.size() > kNamedPrefix.size() && key.compare(0, kNamedPrefix.size(), kNamedPrefix) == 0)
      vocab.named_chat_templates.emplace_back(key.substr(kNamedPrefix.size()), file.get_string(key));
  vocab.fingerprint = vocab_fingerprint(vocab.model_name, vocab.pre_name_file, texts, declared_types, merges);
  return vocab;
}

}  // namespace infer::tokenizer
