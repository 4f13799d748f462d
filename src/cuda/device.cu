// available() and device_info() of a CUDA build: device 0, asked through the runtime.
#include <cstring>

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

namespace {

// Milliseconds of the fastest of `reps` runs of `copy` on `s`, timed with events.
template <typename F>
float best_ms(cudaStream_t s, int reps, F&& copy) {
  cudaEvent_t a, b;
  INFER_CUDA_CHECK(cudaEventCreate(&a));
  INFER_CUDA_CHECK(cudaEventCreate(&b));
  copy();  // warm-up
  float best = 0;
  for (int i = 0; i < reps; ++i) {
    INFER_CUDA_CHECK(cudaEventRecord(a, s));
    copy();
    INFER_CUDA_CHECK(cudaEventRecord(b, s));
    INFER_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    INFER_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i == 0 || ms < best) best = ms;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

}  // namespace

Bandwidth measure_bandwidth(uint64_t bytes, int reps) {
  std::string why;
  if (!available(&why)) throw std::runtime_error("device cuda is not available: " + why);
  void *src = nullptr, *dst = nullptr, *host = nullptr;
  cudaStream_t s = nullptr;
  Bandwidth bw;
  try {
    INFER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    INFER_CUDA_CHECK(cudaMalloc(&src, bytes));
    INFER_CUDA_CHECK(cudaMalloc(&dst, bytes));
    INFER_CUDA_CHECK(cudaMemsetAsync(src, 1, bytes, s));
    const float d2d = best_ms(s, reps, [&] { INFER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)); });
    bw.device_gbs = 2.0 * double(bytes) / (double(d2d) * 1e6);
    INFER_CUDA_CHECK(cudaMallocHost(&host, bytes));
    std::memset(host, 1, bytes);
    const float h2d = best_ms(s, reps, [&] { INFER_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s)); });
    bw.host_to_device_gbs = double(bytes) / (double(h2d) * 1e6);
  } catch (...) {
    cudaFree(src);
    cudaFree(dst);
    cudaFreeHost(host);
    if (s) cudaStreamDestroy(s);
    throw;
  }
  cudaFree(src);
  cudaFree(dst);
  cudaFreeHost(host);
  cudaStreamDestroy(s);
  return bw;
}

}  // namespace infer::cuda
