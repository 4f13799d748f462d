// Byte-level GGUF builder for tests that need files the Writer refuses to make (bad magic, huge
// counts, overlapping tensors, ...). Every field is written exactly as given, little-endian.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace infer::gguf::test {

struct RawGguf {
  std::vector<uint8_t> bytes;

  template <typename T>
  RawGguf& put(T v) {
    size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
  RawGguf& u8(uint8_t v) { return put(v); }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& i32(int32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& i64(int64_t v) { return put(v); }
  RawGguf& f32(float v) { return put(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& header(uint32_t version, int64_t n_tensors, int64_t n_kv) {
    bytes.insert(bytes.end(), {'G', 'G', 'U', 'F'});
    return u32(version).i64(n_tensors).i64(n_kv);
  }
  // One metadata pair with a UINT32 value (type id 4).
  RawGguf& kv_u32(std::string_view key, uint32_t v) { return str(key).i32(4).u32(v); }
  RawGguf& kv_string(std::string_view key, std::string_view v) { return str(key).i32(8).str(v); }
  // One tensor-info record.
  RawGguf& tensor(std::string_view name, std::vector<int64_t> ne, int32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) i64(d);
    return i32(type).u64(offset);
  }
  RawGguf& pad_to(size_t alignment) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes.resize(bytes.size() + n, 0);
    return *this;
  }
};

}  // namespace infer::gguf::test
