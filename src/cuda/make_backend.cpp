#include <stdexcept>

#include "cuda/cuda_backend.h"
#include "cuda/gpu_backend.h"

namespace infer::cuda {

std::unique_ptr<model::Backend> make_backend(const model::Model& model, const model::DeviceOptions& opts,
                                             kernels::ThreadPool& pool, int max_rows, int page_tokens,
                                             int n_pages) {
  if (opts.kind == model::DeviceKind::Cpu) {
    return std::make_unique<model::CpuBackend>(model, pool, max_rows, page_tokens, n_pages, opts.kv_type);
  }
  if (opts.kv_type != kernels::KvType::F16) {
    throw std::runtime_error(std::string("device cuda keeps its KV cache in F16: KV type ") +
                             kernels::kv_type_name(opts.kv_type) + " runs on the CPU only");
  }
  std::string why;
  if (!available(&why)) throw std::runtime_error("device cuda is not available: " + why);
  return make_gpu_backend(model, opts, max_rows, page_tokens, n_pages);
}

}  // namespace infer::cuda
