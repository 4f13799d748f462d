#include "tokenizer/byte_unicode.h"

#include <array>

#include "tokenizer/utf8.h"

namespace infer::tokenizer {
namespace {

struct Table {
  std::array<uint32_t, 256> cp_of_byte{};
  std::array<std::string, 256> text_of_byte;
  std::array<int16_t, 512> byte_of_cp{};  // every mapped code point is below U+0200

  Table() {
    byte_of_cp.fill(-1);
    const auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : next++;
      cp_of_byte[b] = cp;
      text_of_byte[b] = utf8::encode(cp);
      byte_of_cp[cp] = static_cast<int16_t>(b);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return table().text_of_byte[byte]; }

std::optional<uint8_t> unicode_to_byte(uint32_t cp) {
  if (cp >= table().byte_of_cp.size() || table().byte_of_cp[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(table().byte_of_cp[cp]);
}

std::string bytes_to_unicode_text(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += byte_to_unicode(static_cast<uint8_t>(c));
  return out;
}

}  // namespace infer::tokenizer
