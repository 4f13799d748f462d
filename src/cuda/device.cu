// available() and device_info() of a CUDA build: device 0, asked through the runtime.
#include "cuda/check.h"
#include "cuda/cuda_backend.h"

namespace infer::cuda {

bool available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) {
      *why = e != cudaSuccess ? std::string("no CUDA device answers (") + cudaGetErrorString(e) + ")"
                              : std::string("no CUDA device is present");
    }
    cudaGetLastError();  // clear the sticky error of a failed probe
    return false;
  }
  return true;
}

std::optional<DeviceInfo> device_info() {
  if (!available()) return std::nullopt;
  cudaDeviceProp p{};
  INFER_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  DeviceInfo info;
  info.name = p.name;
  info.compute_major = p.major;
  info.compute_minor = p.minor;
  info.multiprocessors = p.multiProcessorCount;
  size_t free_b = 0, total_b = 0;
  INFER_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  info.total_bytes = total_b;
  info.free_bytes = free_b;
  return info;
}

}  // namespace infer::cuda
