#include "gguf_test_files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "gguf/writer.h"

namespace infer::gguf::test {
namespace {

struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    dir = std::filesystem::temp_directory_path() / ("infer_gguf_tests." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

std::string temp_path(const std::string& name) {
  static TempDir tmp;
  return (tmp.dir / name).string();
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string write_small_valid_file() {
  std::string path = temp_path("small_valid.gguf");
  if (std::filesystem::exists(path)) return path;
  Writer w;
  w.add_string("general.architecture", "llama");
  w.add_uint8("t.u8", 200);
  w.add_int8("t.i8", -5);
  w.add_uint16("t.u16", 60000);
  w.add_int16("t.i16", -30000);
  w.add_uint32("t.u32", 4000000000u);
  w.add_int32("t.i32", -2000000000);
  w.add_float32("t.f32", 1.5f);
  w.add_bool("t.bool", true);
  w.add_uint64("t.u64", 1ull << 40);
  w.add_int64("t.i64", -(1ll << 40));
  w.add_float64("t.f64", 0.25);
  std::vector<std::string> tokens = {"a", "bc", ""};
  w.add_array("t.strings", tokens);
  w.add_kv("t.nested", make_array(ValueType::ARRAY, {make_array(ValueType::INT16, {make_int(ValueType::INT16, 7)}),
                                                     make_array(ValueType::INT16, {})}));
  std::vector<float> f32(8 * 2);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<float>(i) * 0.5f;
  w.add_tensor("a.weight", TensorType::F32, {8, 2}, f32.data());
  std::vector<uint8_t> q8(34 * 2, 0x11);
  w.add_tensor("b.weight", TensorType::Q8_0, {32, 2}, q8.data());
  std::vector<uint8_t> q4k(144 * 2, 0x22);  // 288 bytes = 9 × 32: no trailing padding
  w.add_tensor("c.weight", TensorType::Q4_K, {256, 2}, q4k.data());
  w.write(path);
  return path;
}

}  // namespace infer::gguf::test
