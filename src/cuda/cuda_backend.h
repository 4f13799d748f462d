// The device layer: which devices this build and machine offer, and the factory that makes the
// model::Backend a DeviceOptions asks for. Compiled with or without the CUDA toolkit (INFER_CUDA); a
// build without it, or a machine without a GPU, refuses `cuda` with the reason and keeps the CPU.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/runtime/thread_pool.h"
#include "model/backend.h"
#include "model/model.h"

namespace infer::cuda {

struct DeviceInfo {
  std::string name;        // e.g. "NVIDIA H100 80GB HBM3"
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
  uint64_t total_bytes = 0, free_bytes = 0;
};

// Whether `cuda` can be used here: this build has the CUDA backend and device 0 answers. When not,
// `why` (if given) receives one line saying which of the two is missing.
bool available(std::string* why = nullptr);
// Device 0's properties and free memory now, or nullopt when !available().
std::optional<DeviceInfo> device_info();

// Device 0's memory bandwidth, measured now: a device-to-device copy of `bytes` (GB/s counting the
// bytes read and the bytes written: what HBM moves) and a host-to-device copy from page-locked memory;
// the best of `reps` copies each. Throws std::runtime_error when !available().
struct Bandwidth {
  double device_gbs = 0;
  double host_to_device_gbs = 0;
};
Bandwidth measure_bandwidth(uint64_t bytes, int reps);

// The Backend for opts.kind: a CpuBackend on `pool`, or the GPU backend (resident weights, KV pages in
// GPU memory). Throws std::runtime_error with one clear line when `cuda` is not available(), or when the
// weights, the KV pool and the scratch do not fit the GPU's memory (the message names the numbers).
std::unique_ptr<model::Backend> make_backend(const model::Model& model, const model::DeviceOptions& opts,
                                             kernels::ThreadPool& pool, int max_rows, int page_tokens,
                                             int n_pages);

}  // namespace infer::cuda
