// GPT-2's reversible byte ↔ code point table used by byte-level BPE vocabularies: printable bytes map
// to themselves, the other 68 bytes to U+0100.. in byte order (so a space is 'Ġ', U+0120).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace infer::tokenizer {

// UTF-8 text of the code point that stands for `byte`.
const std::string& byte_to_unicode(uint8_t byte);
// The byte a code point stands for; nullopt when the code point is not in the table.
std::optional<uint8_t> unicode_to_byte(uint32_t cp);

// Every byte of `raw` replaced by its code point's UTF-8 (the form vocab entries use).
std::string bytes_to_unicode_text(std::string_view raw);

}  // namespace infer::tokenizer
