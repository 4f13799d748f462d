// AVX2 row kernels by weight type (filled in by the per-type *_avx2.cpp files).
#include "kernels/row_kernels.h"

namespace infer::kernels {

RowKernels avx2_row_kernels(TensorType) { return {nullptr, nullptr}; }

}  // namespace infer::kernels
