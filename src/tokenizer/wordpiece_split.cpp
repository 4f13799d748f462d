#include "tokenizer/wordpiece_split.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/utf16.h>

#include <stdexcept>

#include "tokenizer/utf8.h"

namespace infer::tokenizer {
namespace {

// The ranges llama.cpp (after HF's BertPreTrainedTokenizer) treats as CJK ideographs, its 0x2B920
// start of Extension E included.
bool is_cjk_ideograph(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

const UNormalizer2* nfd_instance() {
  static const UNormalizer2* const instance = [] {
    UErrorCode error = U_ZERO_ERROR;
    const UNormalizer2* n = unorm2_getNFDInstance(&error);
    if (U_FAILURE(error)) throw std::runtime_error(std::string("tokenizer: ICU NFD data: ") + u_errorName(error));
    return n;
  }();
  return instance;
}

// llama.cpp keeps only the first code point of a decomposition. The rest are marks, dropped anyway,
// except in Hangul syllables, which therefore keep only their leading jamo.
UChar32 first_of_nfd(UChar32 c) {
  if (c < 0xC0) return c;  // nothing below À has a canonical decomposition
  UChar buffer[32];
  UErrorCode error = U_ZERO_ERROR;
  const int32_t length = unorm2_getDecomposition(nfd_instance(), c, buffer, 32, &error);
  if (U_FAILURE(error) || length <= 0) return c;
  UChar32 first;
  int32_t i = 0;
  U16_NEXT(buffer, i, length, first);
  return first;
}

}  // namespace

std::vector<std::string> wordpiece_split(std::string_view text, const WordPieceNormalizer& normalizer) {
  std::vector<std::string> words;
  std::string word;
  const auto end_word = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (const uint32_t cp : utf8::decode(text)) {
    const UChar32 c = normalizer.strip_accents ? first_of_nfd(static_cast<UChar32>(cp)) : static_cast<UChar32>(cp);
    if (u_isUWhiteSpace(c)) {
      end_word();
      continue;
    }
    const uint32_t category = U_GET_GC_MASK(c);
    if (c == 0 || c == 0xFFFD || (category & U_GC_C_MASK)) continue;
    if (normalizer.strip_accents && (category & U_GC_M_MASK)) continue;
    const UChar32 out = normalizer.lowercase ? u_tolower(c) : c;
    if ((category & U_GC_P_MASK) || (c < 0x7F && (category & U_GC_S_MASK)) || is_cjk_ideograph(c)) {
      end_word();
      words.push_back(utf8::encode(static_cast<uint32_t>(out)));
      continue;
    }
    utf8::append(word, static_cast<uint32_t>(out));
  }
  end_word();
  return words;
}

}  // namespace infer::tokenizer
