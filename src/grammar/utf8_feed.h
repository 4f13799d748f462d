// Byte-at-a-time UTF-8 decoding for the recogniser: a code point may be split across tokens, so the
// decoder's partial state is part of a matcher's position. Only well-formed UTF-8 passes (no overlong
// forms, surrogates or code points above U+10FFFF): a byte-fallback vocabulary can spell '[' as
// F0 80 81 9B, which is not text.
#pragma once
#include <cstdint>
#include <utility>

namespace infer::grammar {

struct Utf8Partial {
  uint32_t value = 0;     // the bits read so far
  uint8_t remain = 0;     // continuation bytes still expected; 0: between code points
  uint8_t next_lo = 0x80; // the range the next continuation byte must be in (narrower after E0, ED,
  uint8_t next_hi = 0xBF; // F0 and F4: RFC 3629's table)
};

// Feeds byte `b`: 1 when a code point is complete (*cp set, p reset), 0 when more bytes are needed,
// -1 for a byte that cannot come here (p unchanged).
inline int utf8_feed(Utf8Partial& p, uint8_t b, uint32_t* cp) {
  if (p.remain == 0) {
    if (b < 0x80) {
      *cp = b;
      return 1;
    }
    if (b >= 0xC2 && b <= 0xDF) p = {uint32_t(b & 0x1F), 1, 0x80, 0xBF};
    else if (b >= 0xE0 && b <= 0xEF) p = {uint32_t(b & 0x0F), 2, uint8_t(b == 0xE0 ? 0xA0 : 0x80), uint8_t(b == 0xED ? 0x9F : 0xBF)};
    else if (b >= 0xF0 && b <= 0xF4) p = {uint32_t(b & 0x07), 3, uint8_t(b == 0xF0 ? 0x90 : 0x80), uint8_t(b == 0xF4 ? 0x8F : 0xBF)};
    else return -1;
    return 0;
  }
  if (b < p.next_lo || b > p.next_hi) return -1;
  const uint32_t v = (p.value << 6) | (b & 0x3F);
  if (p.remain == 1) {
    p = {};
    *cp = v;
    return 1;
  }
  p = {v, uint8_t(p.remain - 1), 0x80, 0xBF};
  return 0;
}

// The code points a partial sequence can still become, as an inclusive range.
inline std::pair<uint32_t, uint32_t> utf8_partial_range(const Utf8Partial& p) {
  const int rest = 6 * (p.remain - 1);  // bits after the next byte's
  const uint32_t lo = ((p.value << 6) | (p.next_lo & 0x3F)) << rest;
  const uint32_t hi = (((p.value << 6) | (p.next_hi & 0x3F)) << rest) | ((uint32_t(1) << rest) - 1);
  return {lo, hi};
}

}  // namespace infer::grammar
