#include "redis/dump_payload.h"

#include <array>

namespace infer::test {

namespace {

constexpr uint64_t kReflectedJones = 0x95ac9329ac4bc9b5ULL;  // 0xad93d23594c935a9 bit-reversed
constexpr uint8_t kModuleType2 = 7, kOpcodeEof = 0;
constexpr size_t kTrailer = 2 + 8;  // RDB version, CRC

const std::array<uint64_t, 256>& crc_table() {
  static const std::array<uint64_t, 256> table = [] {
    std::array<uint64_t, 256> t{};
    for (uint64_t i = 0; i < 256; ++i) {
      uint64_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kReflectedJones : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// An RDB length at `*at`; nullopt for the special (encoded-string) forms or past the end.
std::optional<uint64_t> read_rdb_len(std::string_view b, size_t* at) {
  if (*at >= b.size()) return std::nullopt;
  const auto first = static_cast<uint8_t>(b[(*at)++]);
  auto big_endian = [&](size_t n) -> std::optional<uint64_t> {
    if (b.size() - *at < n) return std::nullopt;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(b[(*at)++]);
    return v;
  };
  switch (first >> 6) {
    case 0: return first & 0x3f;
    case 1: {
      const auto low = big_endian(1);
      if (!low) return std::nullopt;
      return (uint64_t{first & 0x3fu} << 8) | *low;
    }
    case 2:
      if (first == 0x80) return big_endian(4);
      if (first == 0x81) return big_endian(8);
      return std::nullopt;
    default: return std::nullopt;
  }
}

// liblzf's format: a control byte < 32 copies that many + 1 literal bytes; else a back reference of
// (control >> 5) + 2 bytes (7: plus the next byte), at distance ((control & 31) << 8 | next) + 1.
std::optional<std::string> lzf_decompress(std::string_view in, size_t out_len) {
  std::string out;
  out.reserve(out_len);
  size_t i = 0;
  while (i < in.size()) {
    const auto ctrl = static_cast<uint8_t>(in[i++]);
    if (ctrl < 32) {
      const size_t n = size_t{ctrl} + 1;
      if (in.size() - i < n) return std::nullopt;
      out.append(in.substr(i, n));
      i += n;
      continue;
    }
    size_t n = ctrl >> 5;
    if (n == 7) {
      if (i >= in.size()) return std::nullopt;
      n += static_cast<uint8_t>(in[i++]);
    }
    if (i >= in.size()) return std::nullopt;
    const size_t back = ((size_t{ctrl} & 31) << 8 | static_cast<uint8_t>(in[i++])) + 1;
    if (back > out.size()) return std::nullopt;
    for (size_t k = 0, from = out.size() - back; k < n + 2; ++k) out += out[from + k];
  }
  if (out.size() != out_len) return std::nullopt;
  return out;
}

// An RDB string at `*at`: plain, LZF-compressed (RDB's rdbcompression) or an integer in 1, 2 or 4 bytes.
std::optional<std::string> read_rdb_string(std::string_view b, size_t* at) {
  if (*at >= b.size()) return std::nullopt;
  const auto first = static_cast<uint8_t>(b[*at]);
  if ((first >> 6) != 3) {
    const auto len = read_rdb_len(b, at);
    if (!len || b.size() - *at < *len) return std::nullopt;
    std::string s(b.substr(*at, *len));
    *at += *len;
    return s;
  }
  ++*at;
  const unsigned kind = first & 0x3f;
  if (kind <= 2) {  // little-endian signed integer of 1, 2 or 4 bytes
    const size_t n = size_t{1} << kind;
    if (b.size() - *at < n) return std::nullopt;
    int64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= int64_t{static_cast<uint8_t>(b[*at + k])} << (8 * k);
    if (v & (int64_t{1} << (8 * n - 1))) v -= int64_t{1} << (8 * n);
    *at += n;
    return std::to_string(v);
  }
  if (kind != 3) return std::nullopt;
  const auto clen = read_rdb_len(b, at);
  const auto len = clen ? read_rdb_len(b, at) : std::nullopt;
  if (!len || b.size() - *at < *clen || *len > (size_t{1} << 30)) return std::nullopt;
  auto s = lzf_decompress(b.substr(*at, *clen), *len);
  *at += *clen;
  return s;
}

}  // namespace

uint64_t redis_crc64(uint64_t crc, const void* data, size_t len) {
  const auto& t = crc_table();
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < len; ++i) crc = t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

void put_rdb_len(std::string& out, uint64_t v) {
  if (v < (1u << 6)) {
    out += static_cast<char>(v);
  } else if (v < (1u << 14)) {
    out += static_cast<char>(0x40 | (v >> 8));
    out += static_cast<char>(v & 0xff);
  } else {
    const int n = v <= UINT32_MAX ? 4 : 8;
    out += static_cast<char>(n == 4 ? 0x80 : 0x81);
    for (int i = n - 1; i >= 0; --i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  }
}

std::optional<ModuleValue> parse_module_value(std::string_view bytes, size_t at, size_t* end) {
  ModuleValue v;
  const auto id = read_rdb_len(bytes, &at);
  if (!id) return std::nullopt;
  v.module_id = *id;
  for (;;) {
    const auto opcode = read_rdb_len(bytes, &at);
    if (!opcode) return std::nullopt;
    if (*opcode == kOpcodeEof) break;
    ModuleField f;
    if (*opcode == ModuleField::kUint) {
      const auto v = read_rdb_len(bytes, &at);
      if (!v) return std::nullopt;
      f.kind = ModuleField::kUint;
      f.uint = *v;
    } else if (*opcode == ModuleField::kString) {
      auto s = read_rdb_string(bytes, &at);
      if (!s) return std::nullopt;
      f.kind = ModuleField::kString;
      f.bytes = std::move(*s);
    } else {
      return std::nullopt;
    }
    v.fields.push_back(std::move(f));
  }
  *end = at;
  return v;
}

std::string encode_module_value(const ModuleValue& v) {
  std::string out;
  put_rdb_len(out, v.module_id);
  for (const auto& f : v.fields) {
    put_rdb_len(out, f.kind);
    if (f.kind == ModuleField::kUint) {
      put_rdb_len(out, f.uint);
    } else {
      put_rdb_len(out, f.bytes.size());
      out += f.bytes;
    }
  }
  put_rdb_len(out, kOpcodeEof);
  return out;
}

std::optional<ModuleDump> parse_module_dump(std::string_view payload) {
  if (payload.size() < 1 + kTrailer || static_cast<uint8_t>(payload[0]) != kModuleType2) return std::nullopt;
  const std::string_view body = payload.substr(0, payload.size() - kTrailer);
  size_t end = 0;
  auto value = parse_module_value(body, 1, &end);
  if (!value || end != body.size()) return std::nullopt;
  return ModuleDump{std::move(*value), std::string(payload.substr(body.size(), 2))};
}

std::string encode_module_dump(const ModuleDump& d) {
  return seal_dump(std::string(1, static_cast<char>(kModuleType2)) + encode_module_value(d.value), d.rdb_version);
}

std::string seal_dump(std::string_view body, std::string_view rdb_version) {
  std::string out(body);
  out += rdb_version;
  out.append(8, '\0');
  reseal(out);
  return out;
}

void reseal(std::string& p) {
  if (p.size() < 8) return;
  uint64_t crc = redis_crc64(0, p.data(), p.size() - 8);
  for (int i = 0; i < 8; ++i, crc >>= 8) p[p.size() - 8 + i] = static_cast<char>(crc & 0xff);
}

namespace vset {

std::optional<ElementLayout> parse_element(std::string_view rec, uint8_t quant, uint32_t dim) {
  ElementLayout l;
  size_t at = 0;
  auto u32_at = [&](size_t* field) -> std::optional<uint32_t> {
    if (rec.size() - at < 4) return std::nullopt;
    *field = at;
    at += 4;
    return get<uint32_t>(rec, *field);
  };
  const auto name_len = u32_at(&l.name_len);
  if (!name_len || rec.size() - at < *name_len) return std::nullopt;
  l.name = at;
  at += *name_len;
  const auto attrs_len = u32_at(&l.attrs_len);
  if (!attrs_len || rec.size() - at < *attrs_len) return std::nullopt;
  l.attrs = at;
  at += *attrs_len;
  if (rec.size() - at < 4) return std::nullopt;
  l.norm = at;
  at += 4;
  l.vector_bytes = quant == 0 ? 4 * size_t{dim} : quant == 1 ? 4 + size_t{dim} : (size_t{dim} + 7) / 8;
  if (rec.size() - at < l.vector_bytes + 1) return std::nullopt;
  l.vector = at;
  at += l.vector_bytes;
  l.level = at++;
  const int level = static_cast<uint8_t>(rec[l.level]);
  for (int lv = 0; lv <= level; ++lv) {
    size_t count_at = 0;
    const auto n = u32_at(&count_at);
    if (!n || (rec.size() - at) / 4 < *n) return std::nullopt;
    l.link_count.push_back(count_at);
    l.links.emplace_back();
    for (uint32_t i = 0; i < *n; ++i, at += 4) l.links.back().push_back(at);
  }
  l.size = at;
  return l;
}

}  // namespace vset

}  // namespace infer::test
