// Names and geometry of the KV cache's storage types.
#include "kernels/ops/kv_type.h"

#include <strings.h>

#include <cstring>
#include <stdexcept>

namespace infer::kernels {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::Q8_0: return "q8_0";
    case KvType::Q4_0: return "q4_0";
    default: return "f16";
  }
}

KvType parse_kv_type(const std::string& name) {
  for (KvType t : {KvType::F16, KvType::Q8_0, KvType::Q4_0}) {
    if (name.size() == std::strlen(kv_type_name(t)) && strcasecmp(name.c_str(), kv_type_name(t)) == 0) return t;
  }
  throw std::invalid_argument("unknown KV type '" + name + "' (expected f16, q8_0 or q4_0)");
}

bool kv_type_fits(KvType t, int kv_dim) { return kv_dim > 0 && (t == KvType::F16 || kv_dim % kKvBlockElements == 0); }

}  // namespace infer::kernels
