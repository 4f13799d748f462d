// Byte-at-a-time UTF-8 decoding for the recogniser: a code point may be split across tokens, so the
// decoder's partial state is part of a matcher's position.
#pragma once
#include <cstdint>
#include <utility>

namespace infer::grammar {

struct Utf8Partial {
  uint32_t value = 0;  // the bits read so far
  uint8_t remain = 0;  // continuation bytes still expected; 0: between code points
};

// Feeds byte `b`: 1 when a code point is complete (*cp set, p reset), 0 when more bytes are needed,
// -1 for a byte that cannot come here (p unchanged). Overlong forms and surrogates are not refused: a
// grammar's character classes decide what they match.
inline int utf8_feed(Utf8Partial& p, uint8_t b, uint32_t* cp) {
  if (p.remain == 0) {
    if (b < 0x80) {
      *cp = b;
      return 1;
    }
    if (b >= 0xC2 && b <= 0xDF) p = {uint32_t(b & 0x1F), 1};
    else if ((b >> 4) == 0xE) p = {uint32_t(b & 0x0F), 2};
    else if (b >= 0xF0 && b <= 0xF4) p = {uint32_t(b & 0x07), 3};
    else return -1;
    return 0;
  }
  if ((b >> 6) != 2) return -1;
  const uint32_t v = (p.value << 6) | (b & 0x3F);
  if (p.remain == 1) {
    p = {};
    *cp = v;
    return 1;
  }
  p = {v, uint8_t(p.remain - 1)};
  return 0;
}

// The code points a partial sequence can still become, as an inclusive range.
inline std::pair<uint32_t, uint32_t> utf8_partial_range(const Utf8Partial& p) {
  const uint32_t lo = p.value << (6 * p.remain);
  return {lo, lo | ((uint32_t(1) << (6 * p.remain)) - 1)};
}

}  // namespace infer::grammar
