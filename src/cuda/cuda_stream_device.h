// Layer streaming's device (model/layer_streamer.h) on a GPU: device memory from cudaMalloc, a
// transfer stream of its own beside the backend's compute stream, and two events per slot.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <set>
#include <vector>

#include "model/layer_streamer.h"

namespace infer::cuda {

class CudaStreamDevice final : public model::StreamDevice {
 public:
  explicit CudaStreamDevice(cudaStream_t compute);
  ~CudaStreamDevice() override;  // waits for the transfer stream, frees what is still allocated
  CudaStreamDevice(const CudaStreamDevice&) = delete;
  CudaStreamDevice& operator=(const CudaStreamDevice&) = delete;

  void* alloc(uint64_t bytes) override;
  void free(void* p) override;
  void copy(void* dst, const void* src, uint64_t bytes) override;
  void open_slots(int n_slots) override;
  void wait_consumed(int slot) override;
  void copy_async(int slot, void* dst, const void* src, uint64_t bytes) override;
  void record_copied(int slot) override;
  void wait_copied(int slot) override;
  void record_consumed(int slot) override;
  void synchronize() override;

  uint64_t allocated_bytes() const { return allocated_; }

 private:
  cudaStream_t compute_;
  cudaStream_t transfer_ = nullptr;
  std::vector<cudaEvent_t> copied_, consumed_;
  std::set<void*> blocks_;
  uint64_t allocated_ = 0;
};

}  // namespace infer::cuda
