// libFuzzer target for the GGUF reader: any byte string either parses or throws gguf::Error. A crash,
// a sanitizer report, a leak, a hang or any other exception type is a bug. After a successful parse,
// every accessor is exercised and every tensor view is touched at both ends.
#include <cstddef>
#include <cstdint>

#include "gguf/file.h"

namespace {

using infer::gguf::Error;
using infer::gguf::Value;

uint64_t walk(const Value& v) {
  uint64_t h = static_cast<uint64_t>(v.type);
  try {
    if (v.is_array()) {
      for (const Value& item : v.as_array()) h += walk(item);
    } else if (v.is_string()) {
      h += v.as_string().size();
    } else if (v.is_integer()) {
      h += v.as_uint();  // throws on negative values: that is a reported Error, fine
    } else if (v.is_float()) {
      h += static_cast<uint64_t>(v.as_float() != 0);
    } else {
      h += v.as_bool();
    }
  } catch (const Error&) {
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = infer::gguf::File::from_memory(data, size);
    volatile uint64_t sink = 0;
    for (const auto& [key, value] : f->metadata()) {
      sink = sink + walk(value) + (f->find(key) == &value);
    }
    for (const auto& t : f->tensors()) {
      sink = sink + t.data[0] + t.data[t.n_bytes - 1] + (f->tensor(t.name) == &t) +
             infer::gguf::type_name(t.type).size() + static_cast<uint64_t>(t.n_rows());
    }
    try {
      sink = sink + static_cast<uint64_t>(f->get_int("general.alignment", 0)) +
             f->get_string("general.architecture", "").size();
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
  return 0;
}
