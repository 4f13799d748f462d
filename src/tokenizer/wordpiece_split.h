// BERT pre-processing for WordPiece vocabularies (`tokenizer.ggml.model = "bert"`), as llama.cpp does it
// (spec/architectures-more.md §4.5): text → normalised words, one code point at a time:
//   1. with strip_accents, the code point becomes the first code point of its NFD decomposition;
//   2. White_Space ends the current word;
//   3. U+0000, U+FFFD and \p{C} (control, format, unassigned ...) are dropped;
//   4. with strip_accents, \p{M} marks are dropped (all of M, not only Mn);
//   5. with lowercase, simple lower-case mapping;
//   6. each \p{P}, each ASCII \p{S} and each CJK ideograph is a word of its own;
//   7. anything else extends the current word.
// Unicode data (categories, White_Space, decompositions, case) comes from ICU.
// Thread-safety: pure function; may run concurrently.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace infer::tokenizer {

struct WordPieceNormalizer {
  bool lowercase = true;      // tokenizer.ggml.normalizer.lowercase
  bool strip_accents = true;  // tokenizer.ggml.normalizer.strip_accents
};

// The words of `text` (any bytes: invalid UTF-8 becomes U+FFFD, which is dropped), each non-empty UTF-8.
std::vector<std::string> wordpiece_split(std::string_view text, const WordPieceNormalizer& normalizer);

}  // namespace infer::tokenizer
