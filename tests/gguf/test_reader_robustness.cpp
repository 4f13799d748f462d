// Damaged copies of a valid file (every truncation, flipped bytes in the header, metadata and tensor
// table) either parse or throw gguf::Error: never a crash, a hang or an out-of-bounds read. Each
// attempt parses a fresh buffer of exactly the damaged size, so ASan builds catch any over-read.
#include <gtest/gtest.h>

#include <cstring>
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
    // Touch every view so a bad pointer would show.
    uint64_t sum = 0;
    for (const TensorView& t : f->tensors()) sum += t.data[0] + t.data[t.n_bytes - 1];
    (void)sum;
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

TEST(GgufReaderRobustness, ExtremeLengthFieldsAreRefused) {
  auto path = test::write_small_valid_file();
  auto bytes = test::read_bytes(path);
  // Overwrite every 8-byte window in the metadata with huge values: lengths, counts and dims all
  // hit a bound check instead of an allocation or a read past the end.
  const size_t table_end = File::open(path)->data_offset();
  for (size_t at = 8; at + 8 <= table_end; ++at) {
    for (uint64_t v : {~uint64_t{0}, uint64_t{1} << 62, uint64_t{1} << 31}) {
      auto damaged = bytes;
      std::memcpy(damaged.data() + at, &v, 8);
      parse(damaged, damaged.size());  // either outcome; the test is that it returns
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace infer::gguf
