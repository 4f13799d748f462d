// Writes GGUF v3 files: metadata, tensor table, and tensor data streamed from producers.
//
// Layout follows what ggml's own writer emits (spec/quant-formats.md §1): tensors in the order they were
// added, offsets tightly packed, each tensor padded with zeros to the alignment. The file is written to
// `<path>.tmp` and renamed over `path` at the end, so readers never see a half-written file.
// Tensor data is not held in memory: each tensor is either a caller-owned buffer or a producer callback
// run during write(), so multi-GB files stream to disk.
// Thread-safety: none; use one Writer from one thread.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "gguf/file.h"

namespace infer::gguf {

// Value constructors; they throw Error when `type` does not match the constructor or `v` is out of range.
Value make_uint(ValueType type, uint64_t v);  // UINT8 / UINT16 / UINT32 / UINT64
Value make_int(ValueType type, int64_t v);    // INT8 / INT16 / INT32 / INT64
Value make_float(ValueType type, double v);   // FLOAT32 / FLOAT64
Value make_bool(bool v);
Value make_string(std::string v);
Value make_array(ValueType element_type, std::vector<Value> items);

// Where a tensor producer puts the tensor's bytes, in as many pieces as it likes.
class TensorSink {
 public:
  virtual ~TensorSink() = default;
  virtual void write(const void* data, size_t n_bytes) = 0;
  // Appends n zero bytes; large runs become holes in the file (sparse) instead of written zeros.
  virtual void write_zeros(uint64_t n_bytes) = 0;
};
// Must hand the sink exactly the tensor's byte size (row_bytes × rows), or write() throws.
using TensorProducer = std::function<void(TensorSink& sink)>;

class Writer {
 public:
  // `alignment` must be a power of two; when it is not the default 32, general.alignment is written.
  explicit Writer(uint32_t alignment = 32);

  // Metadata in insertion order. Throws Error on an empty or repeated key or a malformed value, and
  // for "general.alignment" (set it through the constructor).
  void add_kv(std::string key, Value value);
  void add_uint8(std::string key, uint8_t v) { add_kv(std::move(key), make_uint(ValueType::UINT8, v)); }
  void add_int8(std::string key, int8_t v) { add_kv(std::move(key), make_int(ValueType::INT8, v)); }
  void add_uint16(std::string key, uint16_t v) { add_kv(std::move(key), make_uint(ValueType::UINT16, v)); }
  void add_int16(std::string key, int16_t v) { add_kv(std::move(key), make_int(ValueType::INT16, v)); }
  void add_uint32(std::string key, uint32_t v) { add_kv(std::move(key), make_uint(ValueType::UINT32, v)); }
  void add_int32(std::string key, int32_t v) { add_kv(std::move(key), make_int(ValueType::INT32, v)); }
  void add_uint64(std::string key, uint64_t v) { add_kv(std::move(key), make_uint(ValueType::UINT64, v)); }
  void add_int64(std::string key, int64_t v) { add_kv(std::move(key), make_int(ValueType::INT64, v)); }
  void add_float32(std::string key, float v) { add_kv(std::move(key), make_float(ValueType::FLOAT32, v)); }
  void add_float64(std::string key, double v) { add_kv(std::move(key), make_float(ValueType::FLOAT64, v)); }
  void add_bool(std::string key, bool v) { add_kv(std::move(key), make_bool(v)); }
  void add_string(std::string key, std::string v) { add_kv(std::move(key), make_string(std::move(v))); }
  // Typed arrays (the common tokenizer/hparam shapes); other element types go through add_kv(make_array).
  void add_array(std::string key, std::span<const std::string> items);
  void add_array(std::string key, std::span<const float> items);
  void add_array(std::string key, std::span<const int32_t> items);
  void add_array(std::string key, std::span<const uint32_t> items);

  // Tensors in insertion order. `ne` has 1–4 positive dims, ne[0] first (the row length, a multiple of
  // the type's block size); names are non-empty, under 64 bytes and unique. Throws Error otherwise.
  // `bytes` must hold the tensor's byte size and stay valid until write() returns.
  void add_tensor(std::string name, TensorType type, const std::vector<int64_t>& ne, const void* bytes);
  void add_tensor(std::string name, TensorType type, const std::vector<int64_t>& ne, TensorProducer producer);

  // Byte size of a tensor of this shape and type (what its producer must write).
  static uint64_t tensor_bytes(TensorType type, const std::vector<int64_t>& ne);
  size_t n_tensors() const { return tensors_.size(); }

  // Writes the file (see the header comment). Throws Error naming the path on I/O failure, or the
  // tensor whose producer wrote the wrong number of bytes; the temporary file is removed then.
  void write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes;
    TensorProducer producer;
  };
  uint32_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::unordered_set<std::string> keys_;
  std::vector<PendingTensor> tensors_;
  std::unordered_set<std::string> names_;
};

}  // namespace infer::gguf
