#include "cuda/check.h"
#include "cuda/cuda_stream_device.h"

namespace infer::cuda {

CudaStreamDevice::CudaStreamDevice(cudaStream_t compute) : compute_(compute) {
  check(cudaStreamCreateWithFlags(&transfer_, cudaStreamNonBlocking), "transfer stream");
}

CudaStreamDevice::~CudaStreamDevice() {
  cudaStreamSynchronize(transfer_);
  for (cudaEvent_t e : copied_) cudaEventDestroy(e);
  for (cudaEvent_t e : consumed_) cudaEventDestroy(e);
  for (void* p : blocks_) cudaFree(p);
  cudaStreamDestroy(transfer_);
}

void* CudaStreamDevice::alloc(uint64_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc (layer weights)");
  blocks_.insert(p);
  allocated_ += bytes;
  return p;
}

void CudaStreamDevice::free(void* p) {
  if (blocks_.erase(p)) cudaFree(p);
}

void CudaStreamDevice::copy(void* dst, const void* src, uint64_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "upload layer");
}

void CudaStreamDevice::open_slots(int n_slots) {
  for (int i = 0; i < n_slots; ++i) {
    cudaEvent_t a = nullptr, b = nullptr;
    check(cudaEventCreateWithFlags(&a, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&b, cudaEventDisableTiming), "cudaEventCreate");
    copied_.push_back(a);
    consumed_.push_back(b);
  }
}

// An event never recorded counts as complete: the first copies into each slot wait for nothing.
void CudaStreamDevice::wait_consumed(int slot) {
  check(cudaStreamWaitEvent(transfer_, consumed_.at(size_t(slot)), 0), "wait consumed");
}

void CudaStreamDevice::copy_async(int, void* dst, const void* src, uint64_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, transfer_), "stream layer");
}

void CudaStreamDevice::record_copied(int slot) {
  check(cudaEventRecord(copied_.at(size_t(slot)), transfer_), "record copied");
}

void CudaStreamDevice::wait_copied(int slot) {
  check(cudaStreamWaitEvent(compute_, copied_.at(size_t(slot)), 0), "wait copied");
}

void CudaStreamDevice::record_consumed(int slot) {
  check(cudaEventRecord(consumed_.at(size_t(slot)), compute_), "record consumed");
}

void CudaStreamDevice::synchronize() { check(cudaStreamSynchronize(transfer_), "transfer stream"); }

}  // namespace infer::cuda
