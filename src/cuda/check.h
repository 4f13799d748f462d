// CUDA status checks: a failing call throws std::runtime_error naming the call and the error.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace infer::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace infer::cuda

#define INFER_CUDA_CHECK(call) ::infer::cuda::check((call), #call)
