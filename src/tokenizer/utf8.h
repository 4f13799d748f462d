// UTF-8 helpers for the tokenizer: sequence length from a lead byte, code point decoding with the
// replacement character for bad input, and encoding.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace infer::tokenizer::utf8 {

// Length of the sequence a lead byte announces (1 for ASCII and for stray continuation bytes), as
// llama.cpp's symbol splitter counts it. Callers clamp to the bytes left.
inline size_t sequence_length(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

void append(std::string& out, uint32_t cp);
std::string encode(uint32_t cp);

// Decodes `text` into code points; an invalid or truncated sequence becomes U+FFFD and decoding
// resumes at the next byte (what llama.cpp does before its regex split).
std::vector<uint32_t> decode(std::string_view text);

// `text` with every invalid sequence replaced by U+FFFD: valid UTF-8 for PCRE2.
std::string sanitize(std::string_view text);

}  // namespace infer::tokenizer::utf8
