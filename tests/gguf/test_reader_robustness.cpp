// Damaged copies of a valid file (every truncation, flipped bytes in the header, metadata and tensor
// table) either parse or throw gguf::Error: never a crash, a hang or an out-of-bounds read. Each
// attempt parses a fresh buffer of exactly the damaged size, so ASan builds catch any over-read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
#include <memory>

#include "gguf/file.h"
#include "gguf_test_files.h"

namespace infer::gguf {
namespace {

enum class Outcome { Parsed, Error };

Outcome parse(const std::vector<uint8_t>& bytes, size_t size) {
  auto copy = std::make_unique<uint8_t[]>(size ? size : 1);
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size), copy.get());
  try {
    auto f = File::from_memory(copy.get(), size);
    // Touch every view so a bad pointer would show; the volatile sink keeps the reads at -O2.
    uint64_t sum = 0;
    for (const TensorView& t : f->tensors()) sum += t.data[0] + t.data[t.n_bytes - 1];
    [[maybe_unused]] static volatile uint64_t sink;
    sink = sum;
    return Outcome::Parsed;
  } catch (const Error&) {
    return Outcome::Error;
  }
}

TEST(GgufReaderRobustness, EveryTruncationIsAnError) {
  auto bytes = test::read_bytes(test::write_small_valid_file());
  ASSERT_EQ(parse(bytes, bytes.size()), Outcome::Parsed);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(parse(bytes, n), Outcome::Error) << "truncated to " << n << " of " << bytes.size() << " bytes";
  }
}

TEST(GgufReaderRobustness, FlippedBytesInHeaderMetadataAndTableNeverCrash) {
  auto path = test::write_small_valid_file();
  auto bytes = test::read_bytes(path);
  const size_t table_end = File::open(path)->data_offset();
  int n_errors = 0, n_parsed = 0;
  for (size_t at = 0; at < table_end; ++at) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      auto damaged = bytes;
      damaged[at] ^= mask;
      (parse(damaged, damaged.size()) == Outcome::Error ? n_errors : n_parsed)++;
    }
  }
  // Both outcomes occur: flips in key text or values parse, flips in lengths and type ids do not.
  EXPECT_GT(n_errors, 0);
  EXPECT_GT(n_parsed, 0);
}

uint64_t u64_at(const std::vector<uint8_t>& bytes, size_t at) {
  uint64_t v;
  std::memcpy(&v, bytes.data() + at, 8);
  return v;
}

// Offsets of the 8-byte fields of the small valid file that count or size something: the header's
// tensor and key counts, every key's and tensor name's length, and every tensor's dims and data offset.
// Found from the names' text, each checked against the length field in front of it.
std::vector<size_t> length_field_offsets(const std::vector<uint8_t>& bytes, const File& f) {
  std::vector<size_t> at = {8, 16};
  auto length_before = [&](const std::string& text) {
    const auto it = std::search(bytes.begin(), bytes.end(), text.begin(), text.end());
    EXPECT_NE(it, bytes.end()) << text;
    const auto pos = static_cast<size_t>(it - bytes.begin());
    EXPECT_EQ(u64_at(bytes, pos - 8), text.size()) << text;
    at.push_back(pos - 8);
    return pos + text.size();
  };
  for (const auto& key : {"general.architecture", "t.u8", "t.i8", "t.u16", "t.i16", "t.u32", "t.i32", "t.f32",
                          "t.bool", "t.u64", "t.i64", "t.f64", "t.strings", "t.nested"}) {
    length_before(key);
  }
  for (const TensorView& t : f.tensors()) {
    const size_t dims = length_before(t.name) + 4;  // after the name: n_dims (u32), dims (u64 each)
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      EXPECT_EQ(u64_at(bytes, dims + 8 * d), static_cast<uint64_t>(t.ne[d])) << t.name;
      at.push_back(dims + 8 * d);
    }
    const size_t offset = dims + 8 * t.n_dims + 4;  // after the type (u32)
    EXPECT_EQ(u64_at(bytes, offset), t.offset) << t.name;
    at.push_back(offset);
  }
  return at;
}

TEST(GgufReaderRobustness, ExtremeLengthFieldsAreRefused) {
  auto path = test::write_small_valid_file();
  auto bytes = test::read_bytes(path);
  const auto file = File::open(path);
  const uint64_t huge[] = {~uint64_t{0}, uint64_t{1} << 62, uint64_t{1} << 31};
  // Every count, length, dim and offset set to a huge value hits a bound check: an error, never an
  // allocation of that size or a read past the end.
  const auto fields = length_field_offsets(bytes, *file);
  EXPECT_EQ(fields.size(), 2u + 14u + 3u * 4u);  // header, keys, 3 tensors × (name, 2 dims, offset)
  for (size_t at : fields) {
    for (uint64_t v : huge) {
      auto damaged = bytes;
      std::memcpy(damaged.data() + at, &v, 8);
      EXPECT_EQ(parse(damaged, damaged.size()), Outcome::Error) << "field at " << at << " set to " << v;
    }
  }
  // Every other 8-byte window too returns an outcome; huge values in the u64, i64 and f64 values parse.
  int n_errors = 0, n_parsed = 0;
  for (size_t at = 8; at + 8 <= file->data_offset(); ++at) {
    for (uint64_t v : huge) {
      auto damaged = bytes;
      std::memcpy(damaged.data() + at, &v, 8);
      (parse(damaged, damaged.size()) == Outcome::Error ? n_errors : n_parsed)++;
    }
  }
  EXPECT_GT(n_errors, 0);
  EXPECT_GT(n_parsed, 0);
}

}  // namespace
}  // namespace infer::gguf
