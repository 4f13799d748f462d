// GGUF parsing and validation (spec/quant-formats.md §1): header, metadata, tensor table, data layout.
// Every length and count is checked against the bytes left before it is used (DESIGN invariant 2).
#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gguf/file.h"

namespace infer::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;    // llama.cpp's GGUF_MAX_STRING_LENGTH
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 30;  // llama.cpp's array cap
constexpr int kMaxArrayDepth = 4;                          // arrays of arrays: at most 4 levels
// Each array element becomes a ~48-byte Value, so a file of 1-byte elements could ask for 48× its size
// in memory. Real vocabularies hold under 2M values in all; this bound keeps a hostile file near 1 GiB.
constexpr uint64_t kMaxArrayElementsTotal = uint64_t{1} << 24;
constexpr uint32_t kMaxDims = 4;
constexpr size_t kMaxTensorNameBytes = 63;  // GGML_MAX_NAME is 64 including the NUL
constexpr uint32_t kDefaultAlignment = 32;
// Smallest possible encodings, used to refuse counts the remaining bytes cannot hold before
// anything is allocated for them.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;        // key length, 1-byte key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 4 + 8;  // name length, name, n_dims, type, offset

std::string hex_bytes(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

uint64_t min_encoded_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 4 + 8;
  }
  return 1;
}

// Thrown when a read goes past the bytes at hand but not past the file: File::parse asks for more.
struct NeedBytes {
  uint64_t total;  // leading bytes of the file needed
};

// Reads little-endian fields from the image, of which the first `available` bytes are at hand; every
// read is bounds-checked against the file size and names what it reads.
class Parser {
 public:
  Parser(const std::string& path, const uint8_t* base, uint64_t available, uint64_t size)
      : path_(path), base_(base), available_(available), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& what, uint64_t at) const {
    throw Error(path_ + ": " + what + " (at byte " + std::to_string(at) + ")");
  }

  void need(uint64_t n, std::string_view what) const {
    if (n > left()) {
      fail("unexpected end of file reading " + std::string(what) + ": need " + std::to_string(n) + " bytes, " +
               std::to_string(left()) + " left of file size " + std::to_string(size_),
           pos_);
    }
    if (n > available_ - pos_) throw NeedBytes{pos_ + n};
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& what) {
    uint64_t at = pos_;
    auto len = read<uint64_t>(what + " length");
    if (len > kMaxStringBytes) {
      fail(what + ": string length " + std::to_string(len) + " exceeds the limit of 2^30 bytes", at);
    }
    need(len, what + " bytes");
    std::string s(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return s;
  }

  ValueType read_type(const std::string& what) {
    uint64_t at = pos_;
    auto id = read<int32_t>(what + " type");
    if (id < 0 || id > static_cast<int32_t>(ValueType::FLOAT64)) {
      fail(what + ": invalid value type id " + std::to_string(id), at);
    }
    return static_cast<ValueType>(id);
  }

  Value read_value(ValueType type, const std::string& what, int depth) {
    Value v;
    v.type = type;
    switch (type) {
      case ValueType::UINT8: v.data = uint64_t{read<uint8_t>(what)}; break;
      case ValueType::INT8: v.data = int64_t{read<int8_t>(what)}; break;
      case ValueType::UINT16: v.data = uint64_t{read<uint16_t>(what)}; break;
      case ValueType::INT16: v.data = int64_t{read<int16_t>(what)}; break;
      case ValueType::UINT32: v.data = uint64_t{read<uint32_t>(what)}; break;
      case ValueType::INT32: v.data = int64_t{read<int32_t>(what)}; break;
      case ValueType::UINT64: v.data = read<uint64_t>(what); break;
      case ValueType::INT64: v.data = read<int64_t>(what); break;
      case ValueType::FLOAT32: v.data = double{read<float>(what)}; break;
      case ValueType::FLOAT64: v.data = read<double>(what); break;
      case ValueType::BOOL: v.data = read<uint8_t>(what) != 0; break;  // any non-zero byte is true
      case ValueType::STRING: v.data = read_string(what); break;
      case ValueType::ARRAY: {
        uint64_t at = pos_;
        v.element_type = read_type(what + " array element");
        if (v.element_type == ValueType::ARRAY && depth + 1 >= kMaxArrayDepth) {
          fail(what + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels", at);
        }
        uint64_t count_at = pos_;
        auto count = read<uint64_t>(what + " array count");
        if (count > kMaxArrayElements) {
          fail(what + ": array count " + std::to_string(count) + " exceeds the limit of 2^30 elements", count_at);
        }
        if (count > kMaxArrayElementsTotal - n_array_elements_) {
          fail(what + ": array of " + std::to_string(count) + " elements takes the file's metadata past 2^24 " +
                   "array elements in total",
               count_at);
        }
        n_array_elements_ += count;
        if (count > left() / min_encoded_bytes(v.element_type)) {
          fail(what + ": array of " + std::to_string(count) + " " + std::string(value_type_name(v.element_type)) +
                   " cannot fit in the " + std::to_string(left()) + " bytes left",
               count_at);
        }
        std::vector<Value> items;
        items.reserve(count);
        for (uint64_t i = 0; i < count; ++i) {
          items.push_back(read_value(v.element_type, what, depth + 1));
        }
        v.data = std::move(items);
        break;
      }
    }
    return v;
  }

 private:
  const std::string& path_;
  const uint8_t* base_;
  uint64_t available_;  // at most size_, and at least min(size_, 4): the magic is always at hand
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t n_array_elements_ = 0;  // over the whole file, nested arrays included
};


using Metadata = std::vector<std::pair<std::string, Value>>;
using NameIndex = std::unordered_map<std::string_view, size_t>;

// Header (§1.2): magic, version, and the tensor and key counts, each refused when the bytes left
// cannot hold that many records.
struct Header {
  uint32_t version = 0;
  int64_t n_tensors = 0, n_kv = 0;
};

Header read_header(Parser& p, const uint8_t* base, uint64_t size) {
  if (size < 4 || std::memcmp(base, "GGUF", 4) != 0) {
    p.fail("not a GGUF file: magic is [" + hex_bytes(base, std::min<uint64_t>(size, 4)) +
               "], expected [47 47 55 46] (\"GGUF\")",
           0);
  }
  p.read<uint32_t>("magic");
  Header h;
  h.version = p.read<uint32_t>("version");
  if (h.version != 0 && (h.version & 0xFFFF) == 0) {
    p.fail("GGUF version field reads " + std::to_string(h.version) +
               ": the file is big-endian (wrong byte order for this host)",
           4);
  }
  if (h.version == 1) p.fail("GGUF v1 is no longer supported (only v2 and v3); convert the model again", 4);
  if (h.version != 2 && h.version != 3) p.fail("unsupported GGUF version " + std::to_string(h.version), 4);
  h.n_tensors = p.read<int64_t>("tensor count");
  if (h.n_tensors < 0) p.fail("negative tensor count " + std::to_string(h.n_tensors), 8);
  h.n_kv = p.read<int64_t>("metadata count");
  if (h.n_kv < 0) p.fail("negative metadata count " + std::to_string(h.n_kv), 16);
  if (static_cast<uint64_t>(h.n_kv) > p.left() / kMinKvBytes) {
    p.fail("metadata count " + std::to_string(h.n_kv) + " cannot fit in the " + std::to_string(p.left()) +
               " bytes left",
           16);
  }
  if (static_cast<uint64_t>(h.n_tensors) > p.left() / kMinTensorInfoBytes) {
    p.fail("tensor count " + std::to_string(h.n_tensors) + " cannot fit in the " + std::to_string(p.left()) +
               " bytes left",
           8);
  }
  return h;
}

// Metadata (§1.4): n_kv key-value pairs into kv, each record's offset into key_offsets.
void read_metadata(Parser& p, int64_t n_kv, Metadata& kv, std::vector<uint64_t>& key_offsets) {
  kv.reserve(static_cast<size_t>(n_kv));
  key_offsets.reserve(static_cast<size_t>(n_kv));
  for (int64_t i = 0; i < n_kv; ++i) {
    uint64_t at = p.pos();
    std::string key = p.read_string("metadata key #" + std::to_string(i));
    if (key.empty()) p.fail("metadata key #" + std::to_string(i) + " is empty", at);
    std::string what = "key " + key;
    ValueType type = p.read_type(what);
    Value value = p.read_value(type, what, 0);
    kv.emplace_back(std::move(key), std::move(value));
    key_offsets.push_back(at);
  }
}

// Indexes the names of `items` (final: the index's string_views point into them); a name seen twice is
// an error at its second record.
template <class Items, class NameOf>
void index_unique_names(const Parser& p, const Items& items, NameOf name_of, const std::vector<uint64_t>& offsets,
                        const char* what, NameIndex& index) {
  index.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (!index.emplace(name_of(items[i]), i).second) {
      p.fail(std::string(what) + " " + name_of(items[i]), offsets[i]);
    }
  }
}

// Alignment (§1.6): general.alignment, a UINT32 power of two, or the default without it.
uint32_t read_alignment(const Parser& p, const Metadata& kv, const NameIndex& kv_index,
                        const std::vector<uint64_t>& key_offsets) {
  const auto it = kv_index.find("general.alignment");
  if (it == kv_index.end()) return kDefaultAlignment;
  const Value& v = kv[it->second].second;
  if (v.type != ValueType::UINT32) {
    p.fail("key general.alignment has type " + std::string(value_type_name(v.type)) + ", expected UINT32",
           key_offsets[it->second]);
  }
  auto a = v.as_uint();
  if (a == 0 || !std::has_single_bit(a)) {
    p.fail("key general.alignment = " + std::to_string(a) + " is not a non-zero power of two",
           key_offsets[it->second]);
  }
  return static_cast<uint32_t>(a);
}

// One record of the tensor table (§1.5): name, dims, type and offset, with the byte size computed
// and every overflow refused. The data range is checked once the data section's start is known.
TensorView read_tensor_info(Parser& p, int64_t i) {
  uint64_t at = p.pos();
  TensorView t;
  t.name = p.read_string("tensor #" + std::to_string(i) + " name");
  if (t.name.empty()) p.fail("tensor #" + std::to_string(i) + " has an empty name", at);
  std::string what = "tensor " + t.name;
  if (t.name.size() > kMaxTensorNameBytes) {
    p.fail(what + ": name is " + std::to_string(t.name.size()) + " bytes, the limit is " +
               std::to_string(kMaxTensorNameBytes),
           at);
  }
  uint64_t dims_at = p.pos();
  t.n_dims = p.read<uint32_t>(what + " n_dims");
  if (t.n_dims > kMaxDims) p.fail(what + ": n_dims " + std::to_string(t.n_dims) + " exceeds 4", dims_at);
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    uint64_t ne_at = p.pos();
    t.ne[d] = p.read<int64_t>(what + " ne[" + std::to_string(d) + "]");
    if (t.ne[d] <= 0) {
      p.fail(what + ": dimension ne[" + std::to_string(d) + "] = " + std::to_string(t.ne[d]) + " is not positive",
             ne_at);
    }
    if (__builtin_mul_overflow(n_elements, t.ne[d], &n_elements)) {
      p.fail(what + ": element count overflows int64 at ne[" + std::to_string(d) + "]", ne_at);
    }
  }
  uint64_t type_at = p.pos();
  auto type_id = p.read<uint32_t>(what + " type");
  auto traits = type_traits(type_id);
  if (!traits) {
    p.fail(what + ": unknown or removed tensor type id " + std::to_string(static_cast<int32_t>(type_id)), type_at);
  }
  t.type = static_cast<TensorType>(type_id);
  if (t.ne[0] % traits->block_elements != 0) {
    p.fail(what + ": row length ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " +
               std::string(traits->name) + " block size " + std::to_string(traits->block_elements),
           dims_at);
  }
  uint64_t n_bytes = static_cast<uint64_t>(t.ne[0]) / traits->block_elements * traits->block_bytes;
  for (int d = 1; d < 4; ++d) {
    if (__builtin_mul_overflow(n_bytes, static_cast<uint64_t>(t.ne[d]), &n_bytes)) {
      p.fail(what + ": byte size overflows uint64", dims_at);
    }
  }
  t.n_bytes = n_bytes;
  t.offset = p.read<uint64_t>(what + " offset");
  return t;
}

// The data section's start (§1.6): the end of the tensor table rounded up to the alignment, inside
// the file when there are tensors.
uint64_t data_section_start(const Parser& p, uint32_t alignment, bool has_tensors, uint64_t size) {
  const uint64_t end_of_infos = p.pos();
  uint64_t start = 0;
  if (__builtin_add_overflow(end_of_infos, uint64_t{alignment} - 1, &start)) {
    p.fail("data section start overflows", end_of_infos);
  }
  start -= start % alignment;
  if (!has_tensors) return std::min(start, size);  // no padding is required then
  if (start > size) {
    p.fail("data section start " + std::to_string(start) + " is past the end of the file (size " +
               std::to_string(size) + ")",
           end_of_infos);
  }
  return start;
}

// Points t at its data: aligned and inside the file, or an error at its record (record_at).
void place_tensor(const Parser& p, TensorView& t, uint64_t record_at, const uint8_t* base, uint64_t size,
                  uint64_t data_offset, uint32_t alignment) {
  std::string what = "tensor " + t.name;
  if (t.offset % alignment != 0) {
    p.fail(what + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
               std::to_string(alignment),
           record_at);
  }
  uint64_t begin = 0, end = 0;
  if (__builtin_add_overflow(data_offset, t.offset, &begin) || __builtin_add_overflow(begin, t.n_bytes, &end)) {
    p.fail(what + ": data offset " + std::to_string(t.offset) + " + " + std::to_string(t.n_bytes) +
               " bytes overflows",
           record_at);
  }
  if (end > size) {
    p.fail(what + ": data range [" + std::to_string(begin) + ", " + std::to_string(end) + ") exceeds file size " +
               std::to_string(size),
           record_at);
  }
  t.data = base + begin;
}

// No two tensors' data overlap. We require each tensor to be aligned, inside the file and disjoint
// from the others, but not ggml's exact packing: any order and any gaps are accepted.
void check_disjoint(const Parser& p, const std::vector<TensorView>& tensors,
                    const std::vector<uint64_t>& info_offsets) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorView& prev = tensors[order[k - 1]];
    const TensorView& cur = tensors[order[k]];
    if (cur.offset < prev.offset + prev.n_bytes) {  // no overflow: both ranges were checked against the size
      p.fail("tensor " + cur.name + ": data range [" + std::to_string(cur.offset) + ", " +
                 std::to_string(cur.offset + cur.n_bytes) + ") overlaps tensor " + prev.name + " [" +
                 std::to_string(prev.offset) + ", " + std::to_string(prev.offset + prev.n_bytes) + ")",
             info_offsets[order[k]]);
    }
  }
}

}  // namespace

uint64_t File::parse(const uint8_t* image, uint64_t available) {
  try {
    parse_image(image, available);
    return 0;
  } catch (const NeedBytes& more) {
    return more.total;
  }
}

void File::parse_image(const uint8_t* image, uint64_t available) {
  kv_.clear();
  kv_index_.clear();
  tensors_.clear();
  tensor_index_.clear();
  Parser p(path_, image, available, size_);
  const Header h = read_header(p, image, size_);
  version_ = h.version;

  std::vector<uint64_t> key_offsets;
  read_metadata(p, h.n_kv, kv_, key_offsets);
  index_unique_names(p, kv_, [](const auto& kv) -> const std::string& { return kv.first; }, key_offsets,
                     "duplicate metadata key", kv_index_);
  alignment_ = read_alignment(p, kv_, kv_index_, key_offsets);

  std::vector<uint64_t> info_offsets;
  tensors_.reserve(static_cast<size_t>(h.n_tensors));
  info_offsets.reserve(static_cast<size_t>(h.n_tensors));
  for (int64_t i = 0; i < h.n_tensors; ++i) {
    info_offsets.push_back(p.pos());
    tensors_.push_back(read_tensor_info(p, i));
  }
  index_unique_names(p, tensors_, [](const TensorView& t) -> const std::string& { return t.name; }, info_offsets,
                     "duplicate tensor name", tensor_index_);

  data_offset_ = data_section_start(p, alignment_, !tensors_.empty(), size_);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    place_tensor(p, tensors_[i], info_offsets[i], base_, size_, data_offset_, alignment_);
  }
  check_disjoint(p, tensors_, info_offsets);
}

}  // namespace infer::gguf
