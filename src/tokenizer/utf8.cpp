#include "tokenizer/utf8.h"

namespace infer::tokenizer::utf8 {

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode(uint32_t cp) {
  std::string s;
  append(s, cp);
  return s;
}

namespace {
constexpr uint32_t kReplacement = 0xFFFD;

// Decodes one sequence at `pos`; returns false (and leaves pos) when it is invalid.
bool decode_one(std::string_view text, size_t& pos, uint32_t& cp) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  if (lead < 0x80) {
    cp = lead;
    pos += 1;
    return true;
  }
  size_t n = 0;
  uint32_t value = 0;
  if ((lead & 0xE0) == 0xC0) {
    n = 2;
    value = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3;
    value = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4;
    value = lead & 0x07;
  } else {
    return false;
  }
  if (pos + n > text.size()) return false;
  for (size_t i = 1; i < n; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return false;
    value = (value << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8 (PCRE2 rejects them).
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < kMin[n] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return false;
  cp = value;
  pos += n;
  return true;
}
}  // namespace

std::vector<uint32_t> decode(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp = 0;
    if (decode_one(text, pos, cp)) {
      out.push_back(cp);
    } else {
      out.push_back(kReplacement);
      ++pos;
    }
  }
  return out;
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    uint32_t cp = 0;
    if (decode_one(text, pos, cp)) {
      out.append(text.substr(start, pos - start));
    } else {
      append(out, kReplacement);
      ++pos;
    }
  }
  return out;
}

}  // namespace infer::tokenizer::utf8
