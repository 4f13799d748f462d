#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include "tokenizer/utf8.h"

namespace infer::tokenizer {
namespace {

// The regexes (facts of each tokenizer's definition, as llama.cpp lists them).
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Tekken (Mistral Nemo): the tokenizer.json form; llama.cpp spells the case classes with lookaheads.
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kBloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

// llama.cpp's whitespace set (PCRE2's UCP \s also takes U+180E, which llama.cpp does not).
constexpr const char* kWhitespaceClassBody =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Rewrites \s and \S into explicit classes over kWhitespaceClassBody.
std::string with_exact_whitespace(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? std::string(kWhitespaceClassBody) : "[" + std::string(kWhitespaceClassBody) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhitespaceClassBody) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

PreTokenizerSpec spec(std::string name, std::vector<std::string> patterns, bool clean_spaces = true,
                      bool ignore_merges = false, bool add_bos = false) {
  return PreTokenizerSpec{std::move(name), std::move(patterns), ignore_merges, add_bos, clean_spaces};
}

}  // namespace

std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name) {
  const auto is = [&](std::initializer_list<std::string_view> names) {
    for (auto n : names)
      if (n == name) return true;
    return false;
  };
  if (is({"default"}))
    return spec("default", {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"});
  if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"}))
    return spec("llama3", {kLlama3}, true, /*ignore_merges=*/true, /*add_bos=*/true);
  if (is({"dbrx", "smaug-bpe"})) return spec(std::string(name), {kLlama3});
  if (is({"glm4", "chatglm-bpe"})) return spec("chatglm-bpe", {kLlama3});
  if (is({"deepseek-coder"}))
    return spec("deepseek-coder",
                {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
                 R"(\p{N})"},
                false);
  if (is({"falcon"})) return spec("falcon", {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"});
  if (is({"gpt-2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "jina-v2-code", "mpt", "olmo", "jais",
          "roberta-bpe", "trillion", "granite-docling"}))
    return spec(name == "mpt" || name == "olmo" || name == "jais" ? std::string(name) : "gpt-2", {kGpt2});
  if (is({"starcoder", "refact", "codeshell", "exaone", "minerva-7b"})) return spec(std::string(name), {R"(\p{N})", kGpt2});
  if (is({"command-r", "smollm"})) return spec(std::string(name), {R"(\p{N})", kGpt2}, false);
  if (is({"qwen2", "deepseek-r1-qwen", "megrez", "hunyuan", "stablelm2", "solar-open", "grok-2"}))
    return spec(name == "stablelm2" ? "stablelm2" : "qwen2", {kQwen2}, name == "stablelm2");
  if (is({"qwen35"})) return spec("qwen35", {kQwen35}, false);
  if (is({"poro-chat", "viking"}))
    return spec(std::string(name), name == "viking" ? std::vector<std::string>{kBloom, R"(\p{N})"}
                                                    : std::vector<std::string>{kBloom},
                false);
  if (is({"bloom", "gpt3-finnish"})) return spec(std::string(name), {kBloom});
  if (is({"gpt-4o", "llama4"})) return spec("gpt-4o", {kGpt4o}, false);
  if (is({"tekken"})) return spec("tekken", {kTekken}, false, /*ignore_merges=*/true, /*add_bos=*/true);
  return std::nullopt;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns) {
  for (const auto& pattern : patterns) {
    const std::string rewritten = with_exact_whitespace(pattern);
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    auto compiled = std::make_unique<Compiled>();
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.c_str()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
    if (!compiled->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw std::runtime_error("pre-tokenizer regex '" + pattern + "': " + reinterpret_cast<const char*>(message) +
                               " at offset " + std::to_string(error_offset));
    }
    // JIT is an optimisation: when it is unavailable pcre2_match interprets.
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(compiled));
  }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::pair<size_t, size_t>> PreTokenizer::split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> pieces{{0, text.size()}};
  if (text.empty()) return {};
  std::vector<std::pair<size_t, size_t>> next;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (const auto& regex : regexes_) {
    // Match data per call keeps split() reentrant; it costs one small allocation per regex.
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(regex->code, nullptr), &pcre2_match_data_free);
    if (!match) throw std::runtime_error("pre-tokenizer: out of memory for PCRE2 match data");
    next.clear();
    for (const auto& [begin, end] : pieces) {
      size_t emitted = begin;
      size_t search = begin;
      while (search < end) {
        // The subject ends at the piece's end so lookaheads cannot see past it.
        const int rc = pcre2_match(regex->code, subject, end, search, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof message);
          throw std::runtime_error(std::string("pre-tokenizer: regex match failed: ") +
                                   reinterpret_cast<const char*>(message));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
        const size_t match_begin = ovector[0];
        const size_t match_end = ovector[1];
        if (match_end == match_begin) {  // empty match: step over one code point
          search = match_begin + utf8::sequence_length(static_cast<uint8_t>(text[match_begin]));
          continue;
        }
        if (match_begin > emitted) next.emplace_back(emitted, match_begin);
        next.emplace_back(match_begin, match_end);
        emitted = search = match_end;
      }
      if (emitted < end) next.emplace_back(emitted, end);
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace infer::tokenizer
