// A GGUF model file mapped read-only (or, with OpenOptions::huge_page_copy, copied onto huge pages):
// metadata, tensor table and tensor views.
//
// Opening a mapping costs O(metadata): the tensor data is never read or copied, views point into the
// mapping (DESIGN invariant 1); a huge-page copy reads the whole file once. Every count, length, type
// id, dimension, alignment and offset is validated against the file size with overflow-safe
// arithmetic before use (invariant 2); a bad file throws
// gguf::Error naming the problem, the key or tensor, and the byte offset.
//
// The file is read with pread() while it is opened, mapped or copied: one that shrinks or changes
// meanwhile is an Error, never a signal. A mapping reads the weights through the file's pages later on,
// so a mapped file must not be truncated while in use (SIGBUS): replace model files by rename.
// Thread-safety: a File is immutable after open(); all const methods may be called concurrently.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "gguf/tensor_type.h"

namespace infer::gguf {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Metadata value type ids (spec §1.4).
enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Scalars are widened into one of three storage kinds but keep their
// declared `type`. Arrays keep their element type and hold their elements in `array`.
struct Value {
  ValueType type = ValueType::UINT8;
  ValueType element_type = ValueType::UINT8;  // for ARRAY
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<Value>> data;

  bool is_array() const { return type == ValueType::ARRAY; }
  bool is_string() const { return type == ValueType::STRING; }
  bool is_integer() const;  // any of the 8 integer types
  bool is_float() const;    // FLOAT32 / FLOAT64
  // Conversions; throw Error when the stored kind does not convert (e.g. string → int).
  int64_t as_int() const;
  uint64_t as_uint() const;  // throws on negative
  double as_float() const;   // integers convert too
  bool as_bool() const;
  const std::string& as_string() const;
  const std::vector<Value>& as_array() const;
  size_t array_size() const { return is_array() ? as_array().size() : 0; }
};

struct TensorView {
  std::string name;
  TensorType type;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;           // relative to the data section start
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t row_bytes() const { return n_bytes / static_cast<uint64_t>(n_rows() ? n_rows() : 1); }
};

struct OpenOptions {
  bool lock_in_memory = false;  // mlock the mapping (best effort; failure is reported, not fatal)
  bool populate = false;        // MAP_POPULATE: read everything now (only for benchmarks)
  // Read the file into private anonymous memory advised for transparent huge pages instead of mapping
  // it: streaming the weights then takes a TLB miss per 2 MiB, not per 4 KiB (faster decode where THP
  // is on: infer bench; docs/performance.md, Constants), at the price of no page-cache sharing between
  // processes. Read-only once loaded.
  bool huge_page_copy = false;
  // Test seam: called once the file's size is known and before any byte is read, so that a test can
  // change the file under the reader.
  std::function<void()> after_size_known;
};

class File {
 public:
  // Maps and validates `path`. Throws Error on any problem (missing file, bad header, ...).
  static std::unique_ptr<File> open(const std::string& path, const OpenOptions& opts = {});
  // Parses an in-memory image (fuzzing, tests). The bytes must outlive the File.
  static std::unique_ptr<File> from_memory(const uint8_t* bytes, size_t size);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute start of the data section

  // Metadata in file order; lookup by key in O(1).
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters: throw Error naming the key when missing (no default) or of the wrong kind.
  std::string get_string(std::string_view key) const;
  std::string get_string(std::string_view key, std::string_view fallback) const;
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;

  // Tensor table in file order; lookup by name in O(1) (nullptr when absent).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* tensor(std::string_view name) const;

  // Page control over the whole mapping. Safe to call any time; no-ops for from_memory() and copies.
  void prefetch() const;  // MADV_WILLNEED
  void release() const;   // MADV_DONTNEED: pages fault back in from the file if touched again
  bool locked() const { return locked_; }
  bool copied() const { return copied_; }  // opened with huge_page_copy

  // Copies only: calls edit(view, bytes) for each named tensor with its bytes writable, the copy being
  // made read-only again afterwards (lets a loader lay weights out for its kernels once). Throws Error
  // for a mapped file or an unknown name; whatever edit throws is passed on, the copy sealed first.
  void rewrite(const std::vector<std::string>& names,
               const std::function<void(const TensorView&, uint8_t* bytes)>& edit);

 private:
  File() = default;
  // Parses the first `available` bytes of the file's image (all of it, or a prefix read with pread);
  // tensor views point into base_. Returns 0 when parsed, else how many leading bytes it needs.
  uint64_t parse(const uint8_t* image, uint64_t available);
  void parse_image(const uint8_t* image, uint64_t available);  // parse's work; throws for a short prefix
  // Mapped files: parses from prefixes read with pread, growing them until the tensor table fits.
  void parse_from_descriptor(int fd);

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool owns_mapping_ = false;
  bool copied_ = false;       // base_ is an anonymous copy, not the file's pages
  uint64_t mapped_size_ = 0;  // bytes to unmap (a copy is rounded up to whole huge pages)
  bool locked_ = false;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<TensorView> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace infer::gguf
