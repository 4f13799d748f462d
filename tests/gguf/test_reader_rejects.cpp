// Crafted files, one per validation rule: each is refused with an Error that names the problem, the
// key or tensor, and the byte offset. A few lenient cases (v2, gaps between tensors) are accepted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gguf/file.h"
#include "raw_gguf.h"

namespace infer::gguf {
namespace {

using test::RawGguf;
using ::testing::HasSubstr;

// The parse error of `r`, or "" when it parses.
std::string error_of(const RawGguf& r) {
  try {
    File::from_memory(r.bytes.data(), r.bytes.size());
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// Header + one tensor record + padding + data, with knobs for the record's fields.
RawGguf one_tensor(std::vector<int64_t> ne, int32_t type, uint64_t offset, size_t data_bytes, std::string name = "w") {
  RawGguf r;
  r.header(3, 1, 0).tensor(name, std::move(ne), type, offset).pad_to(32).zeros(data_bytes);
  return r;
}

TEST(GgufReaderRejects, BadMagic) {
  RawGguf r;
  r.bytes = {'G', 'G', 'M', 'L'};
  r.u32(3).i64(0).i64(0);
  EXPECT_THAT(error_of(r), HasSubstr("not a GGUF file: magic is [47 47 4d 4c]"));
  RawGguf tiny;
  tiny.bytes = {'G', 'G'};
  EXPECT_THAT(error_of(tiny), HasSubstr("not a GGUF file"));
}

TEST(GgufReaderRejects, VersionOneWithClearMessage) {
  RawGguf r;
  r.header(1, 0, 0);
  EXPECT_THAT(error_of(r), HasSubstr("GGUF v1 is no longer supported"));
}

TEST(GgufReaderRejects, UnknownVersions) {
  for (uint32_t v : {0u, 4u, 0xFFFFu}) {
    RawGguf r;
    r.header(v, 0, 0);
    EXPECT_THAT(error_of(r), HasSubstr("unsupported GGUF version " + std::to_string(v))) << v;
  }
}

TEST(GgufReaderRejects, WrongEndianFile) {
  RawGguf r;
  r.header(0x03000000, 0, 0);
  EXPECT_THAT(error_of(r), HasSubstr("big-endian"));
}

TEST(GgufReaderRejects, NegativeCounts) {
  RawGguf r;
  r.header(3, -1, 0);
  EXPECT_THAT(error_of(r), HasSubstr("negative tensor count -1"));
  RawGguf k;
  k.header(3, 0, -5);
  EXPECT_THAT(error_of(k), HasSubstr("negative metadata count -5"));
}

TEST(GgufReaderRejects, HugeCountsBeforeAllocating) {
  RawGguf kv;
  kv.header(3, 0, int64_t{1} << 40).zeros(100);
  EXPECT_THAT(error_of(kv), HasSubstr("metadata count 1099511627776 cannot fit in the 100 bytes left (at byte 16)"));
  RawGguf t;
  t.header(3, int64_t{1} << 60, 0).zeros(100);
  EXPECT_THAT(error_of(t), HasSubstr("tensor count 1152921504606846976 cannot fit"));
}

TEST(GgufReaderRejects, StringLengthPastEndOfFile) {
  RawGguf r;
  r.header(3, 0, 1).u64(1000).zeros(20);
  EXPECT_THAT(error_of(r), HasSubstr("unexpected end of file reading metadata key #0 bytes: need 1000 bytes, 20 left"));
  RawGguf v;
  v.header(3, 0, 1).str("name").i32(8).u64(50).zeros(10);
  EXPECT_THAT(error_of(v), HasSubstr("key name bytes: need 50 bytes"));
}

TEST(GgufReaderRejects, StringLongerThanOneGiB) {
  RawGguf r;
  r.header(3, 0, 1).str("k").i32(8).u64((uint64_t{1} << 30) + 1);
  EXPECT_THAT(error_of(r), HasSubstr("key k: string length 1073741825 exceeds the limit of 2^30 bytes"));
}

TEST(GgufReaderRejects, EmptyAndDuplicateKeys) {
  RawGguf e;
  e.header(3, 0, 1).str("").i32(4).u32(1);
  EXPECT_THAT(error_of(e), HasSubstr("metadata key #0 is empty (at byte 24)"));
  RawGguf d;
  d.header(3, 0, 3).kv_u32("a", 1).kv_u32("b", 2).kv_u32("a", 3);
  EXPECT_THAT(error_of(d), HasSubstr("duplicate metadata key a (at byte 58)"));
}

TEST(GgufReaderRejects, BadValueTypeNamesKeyAndOffset) {
  RawGguf r;
  r.header(3, 0, 1).str("k").i32(13).u32(0);
  EXPECT_THAT(error_of(r), HasSubstr("key k: invalid value type id 13 (at byte 33)"));
  RawGguf n;
  n.header(3, 0, 1).str("k").i32(-1).u32(0);
  EXPECT_THAT(error_of(n), HasSubstr("invalid value type id -1"));
}

TEST(GgufReaderRejects, BadArrayElementType) {
  RawGguf r;
  r.header(3, 0, 1).str("arr").i32(9).i32(42).u64(1).u32(0);
  EXPECT_THAT(error_of(r), HasSubstr("key arr array element: invalid value type id 42"));
}

TEST(GgufReaderRejects, ArrayCountsBeyondLimitOrFile) {
  RawGguf big;
  big.header(3, 0, 1).str("arr").i32(9).i32(0).u64((uint64_t{1} << 30) + 1);
  EXPECT_THAT(error_of(big), HasSubstr("key arr: array count 1073741825 exceeds the limit of 2^30 elements"));
  RawGguf past;
  past.header(3, 0, 1).str("arr").i32(9).i32(4).u64(1000).zeros(40);
  EXPECT_THAT(error_of(past), HasSubstr("key arr: array of 1000 UINT32 cannot fit in the 40 bytes left"));
  RawGguf strings;  // each string needs at least its 8-byte length
  strings.header(3, 0, 1).str("arr").i32(9).i32(8).u64(100).zeros(799);
  EXPECT_THAT(error_of(strings), HasSubstr("array of 100 STRING cannot fit"));
}

TEST(GgufReaderRejects, MoreThan2To24ArrayElementsInTotal) {
  // Refused before the bytes are even looked for: 2^24 Values would already take ~800 MB of memory.
  RawGguf r;
  r.header(3, 0, 1).str("a").i32(9).i32(0).u64((uint64_t{1} << 24) + 1).zeros(64);
  EXPECT_THAT(error_of(r), HasSubstr("key a: array of 16777217 elements takes the file's metadata past 2^24"));
}

TEST(GgufReaderRejects, ArraysNestedDeeperThanFourLevels) {
  auto nested = [](int levels) {
    RawGguf r;
    r.header(3, 0, 1).str("n").i32(9);
    for (int i = 1; i < levels; ++i) r.i32(9).u64(1);  // element type ARRAY, one element
    r.i32(4).u64(1).u32(7);                           // innermost: one UINT32
    return r;
  };
  EXPECT_EQ(error_of(nested(4)), "");
  EXPECT_THAT(error_of(nested(5)), HasSubstr("key n: arrays nested deeper than 4 levels"));
}

TEST(GgufReaderRejects, AlignmentNotPowerOfTwoOrWrongType) {
  RawGguf r;
  r.header(3, 0, 1).kv_u32("general.alignment", 48);
  EXPECT_THAT(error_of(r), HasSubstr("key general.alignment = 48 is not a non-zero power of two"));
  RawGguf z;
  z.header(3, 0, 1).kv_u32("general.alignment", 0);
  EXPECT_THAT(error_of(z), HasSubstr("is not a non-zero power of two"));
  RawGguf t;
  t.header(3, 0, 1).str("general.alignment").i32(10).u64(64);
  EXPECT_THAT(error_of(t), HasSubstr("key general.alignment has type UINT64, expected UINT32"));
}

TEST(GgufReaderRejects, TooManyDims) {
  EXPECT_THAT(error_of(one_tensor({1, 1, 1, 1, 1}, 0, 0, 32)), HasSubstr("tensor w: n_dims 5 exceeds 4"));
}

TEST(GgufReaderRejects, ZeroOrNegativeDim) {
  EXPECT_THAT(error_of(one_tensor({8, 0}, 0, 0, 32)), HasSubstr("tensor w: dimension ne[1] = 0 is not positive"));
  EXPECT_THAT(error_of(one_tensor({-8}, 0, 0, 32)), HasSubstr("tensor w: dimension ne[0] = -8 is not positive"));
}

TEST(GgufReaderRejects, DimProductOverflow) {
  EXPECT_THAT(error_of(one_tensor({int64_t{1} << 32, int64_t{1} << 32}, 0, 0, 32)),
              HasSubstr("tensor w: element count overflows int64 at ne[1]"));
  EXPECT_THAT(error_of(one_tensor({int64_t{1} << 31, int64_t{1} << 31}, 0, 0, 32)),  // 2^62 F32 = 2^64 bytes
              HasSubstr("tensor w: byte size overflows"));
}

TEST(GgufReaderRejects, UnknownAndRemovedTensorTypes) {
  for (int32_t id : {4, 5, 31, 32, 33, 36, 37, 38, 43, 1000, -1}) {
    EXPECT_THAT(error_of(one_tensor({256}, id, 0, 2048)),
                HasSubstr("tensor w: unknown or removed tensor type id " + std::to_string(id)))
        << id;
  }
}

TEST(GgufReaderRejects, RowNotAMultipleOfTheBlock) {
  EXPECT_THAT(error_of(one_tensor({16, 2}, 2, 0, 64)),
              HasSubstr("tensor w: row length ne[0] = 16 is not a multiple of the Q4_0 block size 32"));
  EXPECT_THAT(error_of(one_tensor({128}, 12, 0, 256)), HasSubstr("Q4_K block size 256"));
}

TEST(GgufReaderRejects, TensorDataPastEndOfFile) {
  // Header 24 + record (8+1 + 4 + 8 + 4 + 8 = 33) = 57 → data starts at 64; 8 F32 = 32 bytes.
  EXPECT_EQ(error_of(one_tensor({8}, 0, 0, 32)), "");
  EXPECT_THAT(error_of(one_tensor({8}, 0, 0, 31)), HasSubstr("tensor w: data range [64, 96) exceeds file size 95"));
  EXPECT_THAT(error_of(one_tensor({8}, 0, 32, 32)), HasSubstr("data range [96, 128) exceeds file size 96"));
  EXPECT_THAT(error_of(one_tensor({8}, 0, ~uint64_t{0} - 31, 32)), HasSubstr("tensor w: data offset"));
}

TEST(GgufReaderRejects, DataSectionStartPastEndOfFile) {
  RawGguf r;
  r.header(3, 1, 0).tensor("w", {8}, 0, 0);  // no padding, no data
  EXPECT_THAT(error_of(r), HasSubstr("data section start 64 is past the end of the file (size 57)"));
}

TEST(GgufReaderRejects, MisalignedOffset) {
  EXPECT_THAT(error_of(one_tensor({4}, 0, 16, 64)),
              HasSubstr("tensor w: data offset 16 is not a multiple of the alignment 32"));
}

TEST(GgufReaderRejects, OverlappingTensors) {
  RawGguf r;
  r.header(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad_to(32).zeros(128);
  EXPECT_THAT(error_of(r), HasSubstr("tensor b: data range [32, 96) overlaps tensor a [0, 64)"));
}

TEST(GgufReaderRejects, DuplicateTensorName) {
  RawGguf r;
  r.header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad_to(32).zeros(64);
  EXPECT_THAT(error_of(r), HasSubstr("duplicate tensor name a"));
}

TEST(GgufReaderRejects, TensorNameEmptyOrTooLong) {
  EXPECT_EQ(error_of(one_tensor({8}, 0, 0, 32, std::string(63, 'x'))), "");
  EXPECT_THAT(error_of(one_tensor({8}, 0, 0, 32, std::string(64, 'x'))), HasSubstr("name is 64 bytes, the limit is 63"));
  EXPECT_THAT(error_of(one_tensor({8}, 0, 0, 32, "")), HasSubstr("tensor #0 has an empty name"));
}

TEST(GgufReaderAccepts, VersionTwo) {
  RawGguf r;
  r.header(2, 0, 1).kv_string("general.architecture", "llama");
  auto f = File::from_memory(r.bytes.data(), r.bytes.size());
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
}

TEST(GgufReaderAccepts, AlignedTensorsInAnyOrderWithGaps) {
  // Not ggml's tight packing, but aligned, disjoint and inside the file: accepted.
  RawGguf r;
  r.header(3, 2, 0).tensor("late", {8}, 0, 128).tensor("early", {8}, 0, 0).pad_to(32).zeros(160);
  auto f = File::from_memory(r.bytes.data(), r.bytes.size());
  EXPECT_EQ(f->tensor("late")->offset, 128u);
  EXPECT_EQ(f->tensor("late")->data, f->tensor("early")->data + 128);
}

TEST(GgufReaderAccepts, AnyNonZeroBoolByteIsTrue) {
  RawGguf r;
  r.header(3, 0, 1).str("b").i32(7).u8(0x7f);
  auto f = File::from_memory(r.bytes.data(), r.bytes.size());
  EXPECT_TRUE(f->get_bool("b", false));
}

TEST(GgufReaderAccepts, TrailingUnitDimsAndLargeAlignment) {
  RawGguf r;
  r.header(3, 1, 1).kv_u32("general.alignment", 64).tensor("w", {32, 1, 1, 1}, 8, 0).pad_to(64).zeros(34);
  auto f = File::from_memory(r.bytes.data(), r.bytes.size());
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->tensor("w")->n_dims, 4u);
  EXPECT_EQ(f->tensor("w")->n_bytes, 34u);
}

}  // namespace
}  // namespace infer::gguf
