// GGUF v3 writer: serialises metadata and the tensor table, then streams tensor data to a temporary
// file that is renamed into place.
#include "gguf/writer.h"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <unistd.h>

namespace infer::gguf {
namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr size_t kMaxTensorNameBytes = 63;

bool is_unsigned(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}
bool is_signed(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}
int width_bits(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: return 8;
    case ValueType::UINT16: case ValueType::INT16: return 16;
    case ValueType::UINT32: case ValueType::INT32: return 32;
    default: return 64;
  }
}

// Checks that the stored kind matches the declared type, recursively, so that write() cannot fail on
// a value add_kv() accepted.
void check_value(const Value& v, const std::string& where) {
  auto bad = [&](const std::string& why) { throw Error("gguf writer: key " + where + ": " + why); };
  auto type_id = static_cast<uint32_t>(v.type);
  if (type_id > static_cast<uint32_t>(ValueType::FLOAT64)) bad("invalid value type id " + std::to_string(type_id));
  bool ok = false;
  if (is_unsigned(v.type)) {
    auto* u = std::get_if<uint64_t>(&v.data);
    ok = u && (width_bits(v.type) == 64 || *u < (uint64_t{1} << width_bits(v.type)));
  } else if (is_signed(v.type)) {
    auto* i = std::get_if<int64_t>(&v.data);
    int bits = width_bits(v.type);
    ok = i && (bits == 64 || (*i >= -(int64_t{1} << (bits - 1)) && *i < (int64_t{1} << (bits - 1))));
  } else if (v.type == ValueType::FLOAT32 || v.type == ValueType::FLOAT64) {
    ok = std::holds_alternative<double>(v.data);
  } else if (v.type == ValueType::BOOL) {
    ok = std::holds_alternative<bool>(v.data);
  } else if (v.type == ValueType::STRING) {
    ok = std::holds_alternative<std::string>(v.data);
  } else {  // ARRAY
    auto* items = std::get_if<std::vector<Value>>(&v.data);
    ok = items != nullptr;
    if (ok) {
      for (const Value& item : *items) {
        if (item.type != v.element_type) {
          bad("array of " + std::string(value_type_name(v.element_type)) + " holds a " +
              std::string(value_type_name(item.type)));
        }
        check_value(item, where);
      }
    }
  }
  if (!ok) bad("value does not hold a " + std::string(value_type_name(v.type)) + " in range");
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  size_t at = out.size();
  out.resize(at + s.size());
  if (!s.empty()) std::memcpy(out.data() + at, s.data(), s.size());
}
void put_value(std::vector<uint8_t>& out, const Value& v) {
  switch (v.type) {
    case ValueType::UINT8: put<uint8_t>(out, static_cast<uint8_t>(std::get<uint64_t>(v.data))); break;
    case ValueType::INT8: put<int8_t>(out, static_cast<int8_t>(std::get<int64_t>(v.data))); break;
    case ValueType::UINT16: put<uint16_t>(out, static_cast<uint16_t>(std::get<uint64_t>(v.data))); break;
    case ValueType::INT16: put<int16_t>(out, static_cast<int16_t>(std::get<int64_t>(v.data))); break;
    case ValueType::UINT32: put<uint32_t>(out, static_cast<uint32_t>(std::get<uint64_t>(v.data))); break;
    case ValueType::INT32: put<int32_t>(out, static_cast<int32_t>(std::get<int64_t>(v.data))); break;
    case ValueType::UINT64: put<uint64_t>(out, std::get<uint64_t>(v.data)); break;
    case ValueType::INT64: put<int64_t>(out, std::get<int64_t>(v.data)); break;
    case ValueType::FLOAT32: put<float>(out, static_cast<float>(std::get<double>(v.data))); break;
    case ValueType::FLOAT64: put<double>(out, std::get<double>(v.data)); break;
    case ValueType::BOOL: put<uint8_t>(out, std::get<bool>(v.data) ? 1 : 0); break;
    case ValueType::STRING: put_string(out, std::get<std::string>(v.data)); break;
    case ValueType::ARRAY: {
      const auto& items = std::get<std::vector<Value>>(v.data);
      put<int32_t>(out, static_cast<int32_t>(v.element_type));
      put<uint64_t>(out, items.size());
      for (const Value& item : items) put_value(out, item);
      break;
    }
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Buffered writes to a descriptor; long zero runs are skipped with lseek so they become holes.
class FileSink : public TensorSink {
 public:
  FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buf_.reserve(kBuffer); }

  void write(const void* data, size_t n) override {
    auto* p = static_cast<const uint8_t*>(data);
    written_ += n;
    if (buf_.size() + n > kBuffer) flush();
    if (n >= kBuffer) {
      raw_write(p, n);
    } else {
      buf_.insert(buf_.end(), p, p + n);
    }
  }

  void write_zeros(uint64_t n) override {
    if (n < kBuffer) {
      buf_.resize(buf_.size() + n, 0);  // stays under 2 × kBuffer: flushed just below
      written_ += n;
      if (buf_.size() >= kBuffer) flush();
      return;
    }
    flush();
    if (::lseek(fd_, static_cast<off_t>(n), SEEK_CUR) < 0) fail("seek");
    written_ += n;
  }

  void flush() {
    if (!buf_.empty()) raw_write(buf_.data(), buf_.size());
    buf_.clear();
  }

  uint64_t written() const { return written_; }

  [[noreturn]] void fail(const char* what) const {
    throw Error("gguf writer: " + path_ + ": " + what + " failed: " + std::strerror(errno));
  }

 private:
  static constexpr size_t kBuffer = size_t{1} << 20;

  void raw_write(const uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t k = ::write(fd_, p, n);
      if (k < 0) {
        if (errno == EINTR) continue;
        fail("write");
      }
      p += k;
      n -= static_cast<size_t>(k);
    }
  }

  int fd_;
  std::string path_;
  std::vector<uint8_t> buf_;
  uint64_t written_ = 0;
};

}  // namespace

Value make_uint(ValueType type, uint64_t v) {
  if (!is_unsigned(type)) throw Error("make_uint: " + std::string(value_type_name(type)) + " is not unsigned");
  Value out{type, ValueType::UINT8, v};
  check_value(out, "(make_uint)");
  return out;
}
Value make_int(ValueType type, int64_t v) {
  if (!is_signed(type)) throw Error("make_int: " + std::string(value_type_name(type)) + " is not signed");
  Value out{type, ValueType::UINT8, v};
  check_value(out, "(make_int)");
  return out;
}
Value make_float(ValueType type, double v) {
  if (type != ValueType::FLOAT32 && type != ValueType::FLOAT64) {
    throw Error("make_float: " + std::string(value_type_name(type)) + " is not a float type");
  }
  return Value{type, ValueType::UINT8, v};
}
Value make_bool(bool v) { return Value{ValueType::BOOL, ValueType::UINT8, v}; }
Value make_string(std::string v) { return Value{ValueType::STRING, ValueType::UINT8, std::move(v)}; }
Value make_array(ValueType element_type, std::vector<Value> items) {
  Value out{ValueType::ARRAY, element_type, std::move(items)};
  check_value(out, "(make_array)");
  return out;
}

Writer::Writer(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment)) {
    throw Error("gguf writer: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  if (alignment != kDefaultAlignment) {
    kv_.emplace_back("general.alignment", make_uint(ValueType::UINT32, alignment));
    keys_.insert("general.alignment");
  }
}

void Writer::add_kv(std::string key, Value value) {
  if (key.empty()) throw Error("gguf writer: empty metadata key");
  if (key == "general.alignment") throw Error("gguf writer: set general.alignment through the Writer constructor");
  if (keys_.count(key)) throw Error("gguf writer: duplicate metadata key " + key);
  check_value(value, key);
  keys_.insert(key);
  kv_.emplace_back(std::move(key), std::move(value));
}

void Writer::add_array(std::string key, std::span<const std::string> items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(make_string(s));
  add_kv(std::move(key), make_array(ValueType::STRING, std::move(v)));
}
void Writer::add_array(std::string key, std::span<const float> items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (float x : items) v.push_back(Value{ValueType::FLOAT32, ValueType::UINT8, double{x}});
  add_kv(std::move(key), make_array(ValueType::FLOAT32, std::move(v)));
}
void Writer::add_array(std::string key, std::span<const int32_t> items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (int32_t x : items) v.push_back(Value{ValueType::INT32, ValueType::UINT8, int64_t{x}});
  add_kv(std::move(key), make_array(ValueType::INT32, std::move(v)));
}
void Writer::add_array(std::string key, std::span<const uint32_t> items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (uint32_t x : items) v.push_back(Value{ValueType::UINT32, ValueType::UINT8, uint64_t{x}});
  add_kv(std::move(key), make_array(ValueType::UINT32, std::move(v)));
}

uint64_t Writer::tensor_bytes(TensorType type, const std::vector<int64_t>& ne) {
  auto traits = type_traits(static_cast<uint32_t>(type));
  if (!traits) throw Error("gguf writer: unknown tensor type " + std::string(type_name(type)));
  if (ne.empty() || ne.size() > 4) {
    throw Error("gguf writer: tensor needs 1 to 4 dims, got " + std::to_string(ne.size()));
  }
  for (int64_t d : ne) {
    if (d <= 0) throw Error("gguf writer: tensor dimension " + std::to_string(d) + " is not positive");
  }
  if (ne[0] % traits->block_elements != 0) {
    throw Error("gguf writer: row length " + std::to_string(ne[0]) + " is not a multiple of the " +
                std::string(traits->name) + " block size " + std::to_string(traits->block_elements));
  }
  uint64_t n = static_cast<uint64_t>(ne[0]) / traits->block_elements * traits->block_bytes;
  for (size_t i = 1; i < ne.size(); ++i) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(ne[i]), &n)) throw Error("gguf writer: tensor size overflows");
  }
  return n;
}

void Writer::add_tensor(std::string name, TensorType type, const std::vector<int64_t>& ne, const void* bytes) {
  uint64_t n = tensor_bytes(type, ne);
  if (!bytes) throw Error("gguf writer: tensor " + name + ": null data");
  add_tensor(std::move(name), type, ne, [bytes, n](TensorSink& sink) { sink.write(bytes, n); });
}

void Writer::add_tensor(std::string name, TensorType type, const std::vector<int64_t>& ne, TensorProducer producer) {
  if (name.empty() || name.size() > kMaxTensorNameBytes) {
    throw Error("gguf writer: tensor name '" + name + "' must be 1 to 63 bytes");
  }
  if (names_.count(name)) throw Error("gguf writer: duplicate tensor name " + name);
  uint64_t n = 0;
  try {
    n = tensor_bytes(type, ne);
  } catch (const Error& e) {
    throw Error("tensor " + name + ": " + e.what());
  }
  names_.insert(name);
  tensors_.push_back(PendingTensor{std::move(name), type, ne, n, std::move(producer)});
}

void Writer::write(const std::string& path) const {
  // Header, metadata and tensor table in memory (they are small next to the data).
  std::vector<uint8_t> head;
  put<uint32_t>(head, 0x46554747);  // "GGUF"
  put<uint32_t>(head, 3);
  put<int64_t>(head, static_cast<int64_t>(tensors_.size()));
  put<int64_t>(head, static_cast<int64_t>(kv_.size()));
  for (const auto& [key, value] : kv_) {
    put_string(head, key);
    put<int32_t>(head, static_cast<int32_t>(value.type));
    put_value(head, value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<int64_t>(head, d);
    put<int32_t>(head, static_cast<int32_t>(t.type));
    put<uint64_t>(head, offset);
    offset = align_up(offset + t.n_bytes, alignment_);
  }
  if (!tensors_.empty()) head.resize(align_up(head.size(), alignment_), 0);

  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("gguf writer: cannot create " + tmp + ": " + std::strerror(errno));
  try {
    FileSink sink(fd, tmp);
    sink.write(head.data(), head.size());
    for (const PendingTensor& t : tensors_) {
      uint64_t start = sink.written();
      t.producer(sink);
      uint64_t got = sink.written() - start;
      if (got != t.n_bytes) {
        throw Error("gguf writer: tensor " + t.name + ": producer wrote " + std::to_string(got) + " bytes, expected " +
                    std::to_string(t.n_bytes));
      }
      sink.write_zeros(align_up(got, alignment_) - got);
    }
    sink.flush();
    // A trailing hole is not part of the file until its size says so.
    if (::ftruncate(fd, static_cast<off_t>(sink.written())) != 0) sink.fail("truncate");
    if (::fdatasync(fd) != 0) sink.fail("fdatasync");
    if (::close(fd) != 0) {
      fd = -1;
      sink.fail("close");
    }
    fd = -1;
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      throw Error("gguf writer: cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
    }
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace infer::gguf
