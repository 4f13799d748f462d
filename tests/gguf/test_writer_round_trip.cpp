// Files written by gguf::Writer read back identically through gguf::File.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <csignal>

#include <cstring>
#include <filesystem>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "gguf_test_files.h"

namespace infer::gguf {
namespace {

using test::temp_path;
using ::testing::HasSubstr;

TEST(GgufWriter, AllValueTypesRoundTrip) {
  auto f = File::open(test::write_small_valid_file());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->metadata().size(), 14u);
  EXPECT_EQ(f->metadata()[0].first, "general.architecture");  // file order is insertion order
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->find("t.u8")->type, ValueType::UINT8);
  EXPECT_EQ(f->get_int("t.u8"), 200);
  EXPECT_EQ(f->get_int("t.i8"), -5);
  EXPECT_EQ(f->get_int("t.u16"), 60000);
  EXPECT_EQ(f->get_int("t.i16"), -30000);
  EXPECT_EQ(f->find("t.u32")->as_uint(), 4000000000u);
  EXPECT_EQ(f->get_int("t.i32"), -2000000000);
  EXPECT_EQ(f->find("t.f32")->type, ValueType::FLOAT32);
  EXPECT_EQ(f->get_float("t.f32"), 1.5);
  EXPECT_TRUE(f->get_bool("t.bool", false));
  EXPECT_EQ(f->find("t.u64")->as_uint(), 1ull << 40);
  EXPECT_EQ(f->get_int("t.i64"), -(1ll << 40));
  EXPECT_EQ(f->get_float("t.f64"), 0.25);
  const Value* strings = f->find("t.strings");
  ASSERT_NE(strings, nullptr);
  EXPECT_EQ(strings->element_type, ValueType::STRING);
  ASSERT_EQ(strings->array_size(), 3u);
  EXPECT_EQ(strings->as_array()[1].as_string(), "bc");
  EXPECT_EQ(strings->as_array()[2].as_string(), "");
  const Value* nested = f->find("t.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->element_type, ValueType::ARRAY);
  ASSERT_EQ(nested->array_size(), 2u);
  EXPECT_EQ(nested->as_array()[0].element_type, ValueType::INT16);
  EXPECT_EQ(nested->as_array()[0].as_array()[0].as_int(), 7);
  EXPECT_EQ(nested->as_array()[1].array_size(), 0u);
}

TEST(GgufWriter, TensorsRoundTripPackedAndAligned) {
  auto f = File::open(test::write_small_valid_file());
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  const TensorView* a = f->tensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, TensorType::F32);
  EXPECT_EQ(a->n_dims, 2u);
  EXPECT_EQ(a->ne[0], 8);
  EXPECT_EQ(a->ne[1], 2);
  EXPECT_EQ(a->ne[2], 1);
  EXPECT_EQ(a->n_bytes, 64u);
  EXPECT_EQ(a->offset, 0u);
  float v[16];
  std::memcpy(v, a->data, sizeof v);
  EXPECT_EQ(v[5], 2.5f);
  const TensorView* b = f->tensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset, 64u);  // tightly packed: 64 bytes, already aligned
  EXPECT_EQ(b->n_bytes, 68u);
  EXPECT_EQ(b->row_bytes(), 34u);
  EXPECT_EQ(b->data[0], 0x11);
  const TensorView* c = f->tensor("c.weight");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->offset, 160u);  // 64 + align_up(68, 32)
  EXPECT_EQ(c->n_bytes, 288u);
  EXPECT_EQ(c->data[287], 0x22);
  EXPECT_EQ(f->file_size(), f->data_offset() + 160 + 288);
  EXPECT_EQ(f->tensor("missing"), nullptr);
}

TEST(GgufWriter, CustomAlignmentIsWrittenAndHonoured) {
  Writer w(256);
  std::vector<uint8_t> data(36, 1);
  w.add_tensor("x", TensorType::F16, {2, 9}, data.data());
  w.add_tensor("y", TensorType::F16, {2, 9}, data.data());
  std::string path = temp_path("align256.gguf");
  w.write(path);
  auto f = File::open(path);
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->find("general.alignment")->type, ValueType::UINT32);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  EXPECT_EQ(f->tensor("y")->offset, 256u);
}

TEST(GgufWriter, ProducerStreamsPiecesAndSparseZeros) {
  Writer w;
  const int64_t rows = 4096, cols = 1024;  // 16 MiB of F32
  w.add_tensor("big", TensorType::F32, {cols, rows}, [&](TensorSink& sink) {
    float row[1024];
    for (int64_t r = 0; r < rows; ++r) {
      if (r % 2) {
        sink.write_zeros(sizeof row);
        continue;
      }
      for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<float>(r);
      sink.write(row, sizeof row);
    }
  });
  w.add_tensor("zeros", TensorType::Q8_0, {32 * 1024, 64}, [](TensorSink& sink) { sink.write_zeros(34 * 1024 * 64); });
  std::string path = temp_path("streamed.gguf");
  w.write(path);
  auto f = File::open(path);
  const TensorView* big = f->tensor("big");
  ASSERT_NE(big, nullptr);
  float x;
  std::memcpy(&x, big->data + 4094 * 4096 + 12, 4);
  EXPECT_EQ(x, 4094.0f);
  std::memcpy(&x, big->data + 4095 * 4096 + 12, 4);
  EXPECT_EQ(x, 0.0f);
  const TensorView* z = f->tensor("zeros");
  EXPECT_EQ(z->data[z->n_bytes - 1], 0);
  EXPECT_EQ(f->file_size(), f->data_offset() + z->offset + z->n_bytes);
}

TEST(GgufWriter, ProducerWithWrongByteCountFailsAndLeavesNoFile) {
  Writer w;
  w.add_tensor("short", TensorType::F32, {4}, [](TensorSink& sink) {
    float v[3] = {1, 2, 3};
    sink.write(v, sizeof v);
  });
  std::string path = temp_path("short.gguf");
  try {
    w.write(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor short: producer wrote 12 bytes, expected 16"));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(GgufWriter, ReplacesAnExistingFileAtomically) {
  std::string path = temp_path("replace.gguf");
  Writer a;
  a.add_uint32("v", 1);
  a.write(path);
  auto old_file = File::open(path);  // still mapped while the new one is renamed over it
  Writer b;
  b.add_uint32("v", 2);
  b.write(path);
  EXPECT_EQ(old_file->get_int("v"), 1);
  EXPECT_EQ(File::open(path)->get_int("v"), 2);
}

TEST(GgufWriter, RefusesInvalidInput) {
  Writer w;
  w.add_uint32("k", 1);
  EXPECT_THROW(w.add_uint32("k", 2), Error);
  EXPECT_THROW(w.add_uint32("", 2), Error);
  EXPECT_THROW(w.add_uint32("general.alignment", 64), Error);
  EXPECT_THROW(make_uint(ValueType::UINT8, 256), Error);
  EXPECT_THROW(make_int(ValueType::INT16, 40000), Error);
  EXPECT_THROW(make_uint(ValueType::INT32, 1), Error);
  EXPECT_THROW(make_array(ValueType::UINT32, {make_int(ValueType::INT32, 1)}), Error);
  float data[64] = {};
  EXPECT_THROW(w.add_tensor("", TensorType::F32, {4}, data), Error);
  EXPECT_THROW(w.add_tensor(std::string(64, 'n'), TensorType::F32, {4}, data), Error);
  EXPECT_THROW(w.add_tensor("t", TensorType::F32, {}, data), Error);
  EXPECT_THROW(w.add_tensor("t", TensorType::F32, {1, 1, 1, 1, 1}, data), Error);
  EXPECT_THROW(w.add_tensor("t", TensorType::F32, {0}, data), Error);
  EXPECT_THROW(w.add_tensor("t", TensorType::Q4_0, {16}, data), Error);
  EXPECT_THROW(w.add_tensor("t", static_cast<TensorType>(4), {32}, data), Error);
  w.add_tensor("t", TensorType::F32, {4}, data);
  EXPECT_THROW(w.add_tensor("t", TensorType::F32, {4}, data), Error);
  EXPECT_THROW(Writer(48), Error);
  EXPECT_THROW(Writer(0), Error);
}


// The file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored) makes the kernel refuse writes past it:
// a write, and the truncation that ends a trailing hole, fail with the reason, and nothing is left
// behind (no file, no .tmp).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = saved_;
    small.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &small);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

std::string write_error(const Writer& w, const std::string& path) {
  try {
    FileSizeLimit limit(64 * 1024);
    w.write(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(written)";
}

TEST(GgufWriter, AFailedWriteNamesTheReasonAndLeavesNothing) {
  Writer data;
  std::vector<uint8_t> bytes(1 << 20, 7);  // 1 MiB of F16, past the 64 KiB limit
  data.add_tensor("x", TensorType::F16, {512, 1024}, bytes.data());
  const std::string path = temp_path("too_big.gguf");
  EXPECT_THAT(write_error(data, path), ::testing::HasSubstr(".tmp: write failed: File too large"));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  Writer hole;  // all zeros: a seek past the limit, then the truncation that sizes the file fails
  hole.add_tensor("z", TensorType::Q8_0, {32 * 1024, 64}, [](TensorSink& sink) { sink.write_zeros(34 * 1024 * 64); });
  EXPECT_THAT(write_error(hole, path), ::testing::HasSubstr(".tmp: truncate failed: File too large"));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace infer::gguf
