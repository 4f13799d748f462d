// Writes small, valid, varied GGUF files (via gguf::Writer) into a directory, as the starting corpus
// for gguf_fuzz. Usage: gguf_fuzz_seeds DIR
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"

using namespace infer::gguf;

namespace {

void write_seeds(const std::string& dir) {
  {  // metadata only: every scalar type, string and nested arrays
    Writer w;
    w.add_string("general.architecture", "llama");
    w.add_uint8("a.u8", 1);
    w.add_int8("a.i8", -1);
    w.add_uint16("a.u16", 2);
    w.add_int16("a.i16", -2);
    w.add_uint32("a.u32", 3);
    w.add_int32("a.i32", -3);
    w.add_float32("a.f32", 0.5f);
    w.add_bool("a.bool", true);
    w.add_uint64("a.u64", 4);
    w.add_int64("a.i64", -4);
    w.add_float64("a.f64", 0.25);
    std::vector<std::string> tokens = {"<s>", "</s>", "a", "b"};
    w.add_array("tokenizer.ggml.tokens", tokens);
    std::vector<float> scores = {0, 0, -1, -2};
    w.add_array("tokenizer.ggml.scores", scores);
    std::vector<int32_t> types = {3, 3, 1, 1};
    w.add_array("tokenizer.ggml.token_type", types);
    w.add_kv("a.nested", make_array(ValueType::ARRAY, {make_array(ValueType::UINT8, {make_uint(ValueType::UINT8, 9)})}));
    w.write(dir + "/metadata.gguf");
  }
  {  // one tensor of each common block type
    Writer w;
    w.add_string("general.architecture", "llama");
    struct T { const char* name; TensorType type; int64_t ne0; };
    for (const T& t : {T{"f32", TensorType::F32, 8}, T{"f16", TensorType::F16, 8}, T{"q4_0", TensorType::Q4_0, 32},
                       T{"q8_0", TensorType::Q8_0, 32}, T{"q4_k", TensorType::Q4_K, 256},
                       T{"q6_k", TensorType::Q6_K, 256}}) {
      std::vector<int64_t> ne = {t.ne0, 2};
      uint64_t n = Writer::tensor_bytes(t.type, ne);
      w.add_tensor(t.name, t.type, ne, [n](TensorSink& s) {
        std::vector<uint8_t> bytes(n);
        for (uint64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 7);
        s.write(bytes.data(), n);
      });
    }
    w.write(dir + "/tensors.gguf");
  }
  {  // non-default alignment, 4-d tensor
    Writer w(64);
    std::vector<float> v(2 * 3 * 4 * 5, 1.0f);
    w.add_tensor("cube", TensorType::F32, {2, 3, 4, 5}, v.data());
    w.add_tensor("row", TensorType::F32, {4}, v.data());
    w.write(dir + "/aligned64.gguf");
  }
  {  // empty
    Writer w;
    w.write(dir + "/empty.gguf");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    write_seeds(argv[1]);
    for (const char* name : {"metadata", "tensors", "aligned64", "empty"}) {
      File::open(std::string(argv[1]) + "/" + name + ".gguf");  // a seed must itself be valid
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
