// Writes a modified copy of a real GGUF file (metadata keys replaced, added or dropped; tensors dropped,
// replaced or added) to a temporary path, for testing how loading reacts to one precise defect.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gguf/file.h"

namespace infer::test {

struct GgufVariant {
  // key → new value, or nullopt to drop the key. Keys not in the source are appended.
  std::map<std::string, std::optional<gguf::Value>> kv;
  std::set<std::string> drop_tensors;
  struct Tensor {
    std::string name;
    gguf::TensorType type;
    std::vector<int64_t> ne;
    const void* data;  // must hold the tensor's bytes until write_variant returns
  };
  std::vector<Tensor> put_tensors;  // replaces a tensor of the same name in place, else appended
};

// Writes the variant under the temp directory and returns its path; the file is removed by
// ~TempGguf.
class TempGguf {
 public:
  TempGguf(const gguf::File& src, const GgufVariant& v, const std::string& tag);
  ~TempGguf();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace infer::test
