// The per-type kernels matmul is built from, chosen once by CPU features. Internal to src/kernels.
#pragma once
#include <cstdint>

#include "kernels/quant.h"

namespace infer::kernels {

// Dots one weight row with `n_rows` (1..kMaxRows) activation rows, already in activation_type:
// out[r * out_stride] = w_row · act[r], where act[r] starts at act + r * act_stride bytes.
// Invariant 7: the value for each r is bitwise the same whatever n_rows is and wherever r sits.
using DotRowsFn = void (*)(int64_t n, const void* w_row, const uint8_t* act, uint64_t act_stride, int n_rows,
                           float* out, int64_t out_stride);
// Converts n floats into activation_type(weight), bit-identical to quantize_activation_row.
using QuantizeActFn = void (*)(const float* src, void* dst, int64_t n);

inline constexpr int kMaxRows = 4;

struct RowKernels {
  DotRowsFn dot_rows;
  QuantizeActFn quantize_act;
};

// AVX2 kernels when use_avx2(), the scalar references otherwise. Throws for unsupported types.
RowKernels row_kernels(TensorType weight);
// The scalar references only (tests, INFER_FORCE_SCALAR).
RowKernels scalar_row_kernels(TensorType weight);
// The AVX2 kernels, or {nullptr, nullptr} when the type has none. Call only when use_avx2().
RowKernels avx2_row_kernels(TensorType weight);

}  // namespace infer::kernels
