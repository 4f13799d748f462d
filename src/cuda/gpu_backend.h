// The GPU backend's constructor, kept out of cuda_backend.h so that callers reach it only through
// make_backend (which checks available() first). Defined in gpu_backend.cu, or in no_cuda.cpp for a
// build without the CUDA toolkit.
#pragma once
#include <memory>

#include "model/backend.h"

namespace infer::cuda {

std::unique_ptr<model::Backend> make_gpu_backend(const model::Model& model, const model::DeviceOptions& opts,
                                                 int max_rows, int page_tokens, int n_pages);

}  // namespace infer::cuda
