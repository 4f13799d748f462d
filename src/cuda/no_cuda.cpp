// A build without the CUDA toolkit (INFER_CUDA off): no device is ever available.
#include <stdexcept>

#include "cuda/cuda_backend.h"
#include "cuda/gpu_backend.h"

namespace infer::cuda {

bool available(std::string* why) {
  if (why) *why = "this build has no CUDA backend (configure with -DINFER_CUDA=ON where nvcc is installed)";
  return false;
}

std::optional<DeviceInfo> device_info() { return std::nullopt; }

Bandwidth measure_bandwidth(uint64_t, int) {
  std::string why;
  available(&why);
  throw std::runtime_error("device cuda is not available: " + why);
}

std::unique_ptr<model::Backend> make_gpu_backend(const model::Model&, const model::DeviceOptions&, int, int, int) {
  std::string why;
  available(&why);
  throw std::runtime_error("device cuda is not available: " + why);
}

}  // namespace infer::cuda
