// Metadata values of every GGUF type (spec §1.4) read back through Value and File's typed getters:
// each type's name, the conversions that hold, and the Error (naming the key) for those that don't.
#include <cmath>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gguf/file.h"
#include "raw_gguf.h"

namespace infer::gguf {
namespace {

using test::RawGguf;
using ::testing::HasSubstr;

// One pair per value type, type ids 0..12 in order; the array holds two INT16s.
RawGguf every_type() {
  RawGguf r;
  r.header(3, 0, 13);
  r.str("u8").i32(0).u8(200);
  r.str("i8").i32(1).u8(static_cast<uint8_t>(-5));
  r.str("u16").i32(2).put<uint16_t>(60000);
  r.str("i16").i32(3).put<int16_t>(-300);
  r.str("u32").i32(4).u32(4000000000u);
  r.str("i32").i32(5).i32(-70000);
  r.str("f32").i32(6).f32(1.5f);
  r.str("bool").i32(7).u8(1);
  r.str("string").i32(8).str("text");
  r.str("array").i32(9).i32(3).u64(2).put<int16_t>(7).put<int16_t>(-8);
  r.str("u64").i32(10).u64(~uint64_t{0});
  r.str("i64").i32(11).i64(-9000000000);
  r.str("f64").i32(12).put<double>(-2.25);
  return r;
}

TEST(MetadataValues, EveryTypeReadsBackWithItsName) {
  const RawGguf r = every_type();
  auto f = File::from_memory(r.bytes.data(), r.bytes.size());
  const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  const char* types[] = {"UINT8", "INT8",  "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                         "BOOL",  "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
  for (int i = 0; i < 13; ++i) {
    const Value* v = f->find(names[i]);
    ASSERT_NE(v, nullptr) << names[i];
    EXPECT_EQ(value_type_name(v->type), types[i]);
  }
  EXPECT_EQ(value_type_name(static_cast<ValueType>(99)), "INVALID");

  EXPECT_EQ(f->get_int("u8"), 200);
  EXPECT_EQ(f->get_int("i8"), -5);
  EXPECT_EQ(f->get_int("u16", 0), 60000);
  EXPECT_EQ(f->get_int("i16", 0), -300);
  EXPECT_EQ(f->find("u32")->as_uint(), 4000000000u);
  EXPECT_EQ(f->find("i64")->as_int(), -9000000000);
}

TEST(MetadataValues, ConversionsThatHoldAndThoseThatDoNot) {
  const RawGguf r = every_type();
  auto f = File::from_memory(r.bytes.data(), r.bytes.size());
  EXPECT_TRUE(f->find("u64")->is_integer());
  EXPECT_FALSE(f->find("f32")->is_integer());
  EXPECT_TRUE(f->find("f64")->is_float());
  EXPECT_FALSE(f->find("bool")->is_float());

  // Numbers: integers convert to float, floats stay floats; a fallback is only for a missing key.
  EXPECT_EQ(f->get_float("f32"), 1.5);
  EXPECT_EQ(f->get_float("f64", 0.0), -2.25);
  EXPECT_EQ(f->get_float("u16", 0.0), 60000.0);
  EXPECT_EQ(f->get_float("i32", 0.0), -70000.0);
  EXPECT_EQ(f->get_float("missing", 3.0), 3.0);
  EXPECT_EQ(f->find("u8")->as_uint(), 200u);
  EXPECT_EQ(f->find("array")->as_array().size(), 2u);
  EXPECT_EQ(f->find("array")->as_array()[1].as_int(), -8);
  EXPECT_TRUE(f->find("bool")->as_bool());
  EXPECT_EQ(f->get_string("string", "x"), "text");

  auto error = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(error([&] { f->find("i32")->as_uint(); }), HasSubstr("-70000 is negative where unsigned is required"));
  EXPECT_THAT(error([&] { f->find("u64")->as_int(); }), HasSubstr("does not fit in int64"));
  EXPECT_THAT(error([&] { f->find("bool")->as_float(); }), HasSubstr("metadata value of type BOOL is not a number"));
  EXPECT_THAT(error([&] { f->find("f32")->as_uint(); }), HasSubstr("FLOAT32 is not an integer"));
  EXPECT_THAT(error([&] { f->find("string")->as_array(); }), HasSubstr("STRING is not an array"));
  EXPECT_THAT(error([&] { f->find("array")->as_string(); }), HasSubstr("ARRAY is not a string"));
  EXPECT_THAT(error([&] { f->find("u8")->as_bool(); }), HasSubstr("UINT8 is not a bool"));
  // Through File's getters the error names the key.
  EXPECT_THAT(error([&] { f->get_int("f64", 0); }), HasSubstr("key f64: metadata value of type FLOAT64 is not an integer"));
  EXPECT_THAT(error([&] { f->get_float("string", 0.0); }), HasSubstr("key string: metadata value of type STRING is not a number"));
}

}  // namespace
}  // namespace infer::gguf
