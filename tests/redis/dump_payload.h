// Test helper: taking apart and rebuilding what DUMP returns for a module value, and the records of an
// infervset value inside it, so that tests and the RESTORE fuzzer can forge precise payloads.
//
// A DUMP payload is the value as RDB writes it, then the 2-byte RDB version, then a CRC-64 of both
// (little-endian). A module value (RDB_TYPE_MODULE_2 = 7) is the 64-bit module id (its low 10 bits are the
// type's encoding version) and then opcode-tagged fields: 2 = unsigned, 5 = string, ..., 0 = end. An
// RDB file ends with the same CRC over everything before it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infer::test {

// Redis's CRC-64 (Jones polynomial, reflected, no final xor); `crc` chains calls, 0 to start.
uint64_t redis_crc64(uint64_t crc, const void* data, size_t len);

// Appends an RDB length (6-, 14-, 32- or 64-bit form, the shortest that fits).
void put_rdb_len(std::string& out, uint64_t v);

struct ModuleField {
  enum Kind : uint8_t { kUint = 2, kString = 5 };
  Kind kind = kUint;
  uint64_t uint = 0;  // kUint
  std::string bytes;  // kString
};

// A module value: the module id (opaque 8 bytes, big-endian as RDB writes it) and its fields before
// the end opcode.
struct ModuleValue {
  uint64_t module_id = 0;
  std::vector<ModuleField> fields;
};

// Parses a module value starting at `at` (just after the type byte) in `bytes`; on success `*end` is
// the offset just past the end opcode. Strings may be plain, LZF-compressed or integer-encoded (they
// are rebuilt plain); nullopt for other field kinds or damaged input.
std::optional<ModuleValue> parse_module_value(std::string_view bytes, size_t at, size_t* end);
// The value as RDB writes it with rdbcompression off, from the module id to the end opcode (no type byte).
std::string encode_module_value(const ModuleValue& v);

// A DUMP payload taken apart: nullopt when it is not a plain module value.
struct ModuleDump {
  ModuleValue value;
  std::string rdb_version;  // the 2 bytes before the CRC
};
std::optional<ModuleDump> parse_module_dump(std::string_view payload);
// Type byte, value, RDB version, CRC.
std::string encode_module_dump(const ModuleDump& d);
// `body` (type byte and value, possibly damaged) + RDB version + the CRC of both.
std::string seal_dump(std::string_view body, std::string_view rdb_version);
// Recomputes the trailing CRC of a DUMP payload or RDB file in place (the last 8 bytes).
void reseal(std::string& payload_or_file);

// The infervset records (src/vector/serialize.cpp, encoding version 2): field 0 is the record count,
// then the header record, the REDUCE matrix record when the header's projection dimension is not 0,
// then one record per element.
namespace vset {
// Header byte offsets.
inline constexpr size_t kMagic = 0, kDim = 4, kQuant = 8, kM = 9, kEf = 13, kCounter = 17, kCount = 25, kEntry = 33,
                        kProjectionDim = 41, kHeaderSize = 45;
// Element record byte offsets, parsed against the header's quantisation and dimension.
struct ElementLayout {
  size_t name_len = 0, name = 0, attrs_len = 0, attrs = 0, norm = 0, vector = 0, vector_bytes = 0, level = 0;
  std::vector<size_t> link_count;          // per level: offset of the u32 count
  std::vector<std::vector<size_t>> links;  // per level: offsets of the u32 targets
  size_t size = 0;                         // where the record should end
};
std::optional<ElementLayout> parse_element(std::string_view record, uint8_t quant, uint32_t dim);

// Loads and stores in the records' byte order (little-endian, as on every machine this runs on).
template <class T>
T get(std::string_view rec, size_t at) {
  T v{};
  if (at + sizeof(T) <= rec.size()) std::memcpy(&v, rec.data() + at, sizeof(T));
  return v;
}
template <class T>
void set(std::string& rec, size_t at, T v) {
  if (at + sizeof(T) <= rec.size()) std::memcpy(rec.data() + at, &v, sizeof(T));
}
}  // namespace vset

}  // namespace infer::test
