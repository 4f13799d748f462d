// CUDA and cuBLAS status checks: a failing call throws std::runtime_error naming the call and the error.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace infer::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cublas: ") + what + ": " + cublasGetStatusString(s));
  }
}

}  // namespace infer::cuda

#define INFER_CUDA_CHECK(call) ::infer::cuda::check((call), #call)
