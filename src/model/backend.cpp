#include "model/backend.h"

#include <stdexcept>

namespace infer::model {

DeviceKind parse_device(const std::string& name) {
  if (name == "cpu") return DeviceKind::Cpu;
  if (name == "cuda") return DeviceKind::Cuda;
  throw std::invalid_argument("unknown device '" + name + "' (expected cpu or cuda)");
}

const char* device_name(DeviceKind kind) { return kind == DeviceKind::Cuda ? "cuda" : "cpu"; }

CpuBackend::CpuBackend(const Model& model, kernels::ThreadPool& pool, int max_rows, int page_tokens, int n_pages,
                       kernels::KvType kv_type)
    : kv_(model.hparams(), page_tokens, n_pages, kv_type), forward_(model, pool, max_rows), threads_(pool.size()) {}

void CpuBackend::run(const Batch& batch, float* logits, float* hidden, PassProfile* profile) {
  forward_.run(batch, kv_, logits, hidden, profile);
}

std::string CpuBackend::description() const {
  return "cpu, " + std::to_string(threads_) + " threads, KV " + std::to_string(kv_.n_pages()) + " pages of " +
         std::to_string(kv_.page_tokens()) + " tokens " + kernels::kv_type_name(kv_.type()) + " (" +
         std::to_string(kv_.bytes() >> 20) + " MiB)";
}

}  // namespace infer::model
