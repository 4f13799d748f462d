// TempGguf (gguf_variant.h).
#include "gguf_variant.h"

#include <unistd.h>

#include <filesystem>

#include "gguf/writer.h"

namespace infer::test {

TempGguf::TempGguf(const gguf::File& src, const GgufVariant& v, const std::string& tag) {
  path_ = (std::filesystem::temp_directory_path() /
           ("infer-model-test-" + std::to_string(::getpid()) + "-" + tag + ".gguf"))
              .string();
  gguf::Writer w(src.alignment());
  std::set<std::string> seen;
  for (const auto& [key, value] : src.metadata()) {
    if (key == "general.alignment") continue;  // the writer sets it from the constructor
    seen.insert(key);
    auto it = v.kv.find(key);
    if (it == v.kv.end()) {
      w.add_kv(key, value);
    } else if (it->second) {
      w.add_kv(key, *it->second);
    }
  }
  for (const auto& [key, value] : v.kv) {
    if (!seen.count(key) && value) w.add_kv(key, *value);
  }
  std::set<std::string> put;
  for (const auto& t : src.tensors()) {
    if (v.drop_tensors.count(t.name)) continue;
    bool replaced = false;
    for (const auto& p : v.put_tensors) {
      if (p.name == t.name) {
        w.add_tensor(p.name, p.type, p.ne, p.data);
        put.insert(p.name);
        replaced = true;
      }
    }
    if (!replaced) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + (t.n_dims ? t.n_dims : 1)), t.data);
  }
  for (const auto& p : v.put_tensors) {
    if (!put.count(p.name)) w.add_tensor(p.name, p.type, p.ne, p.data);
  }
  w.write(path_);
}

TempGguf::~TempGguf() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

}  // namespace infer::test
