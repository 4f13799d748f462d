// Run-time choice between the scalar and AVX2 row kernels.
#include "kernels/row_kernels.h"

#include "kernels/cpu_features.h"
#include "kernels/formats.h"

namespace infer::kernels {

namespace {
template <float (*Dot)(const void*, const void*, int64_t)>
void scalar_dot_rows(int64_t n, const void* w_row, const uint8_t* act, uint64_t act_stride, int n_rows,
                     float* out, int64_t out_stride) {
  for (int r = 0; r < n_rows; ++r) out[r * out_stride] = Dot(w_row, act + r * act_stride, n);
}

void copy_f32(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(dst)[i] = src[i];
}
}  // namespace

RowKernels scalar_row_kernels(TensorType weight) {
  switch (weight) {
    case TensorType::F32: return {scalar_dot_rows<ref::dot_f32>, copy_f32};
    case TensorType::F16: return {scalar_dot_rows<ref::dot_f16>, ref::quantize_f16};
    case TensorType::BF16: return {scalar_dot_rows<ref::dot_bf16>, ref::quantize_bf16};
    case TensorType::Q8_0: return {scalar_dot_rows<ref::dot_q8_0>, ref::quantize_q8_0_activation};
    case TensorType::Q4_0: return {scalar_dot_rows<ref::dot_q4_0>, ref::quantize_q8_0_activation};
    case TensorType::Q4_K: return {scalar_dot_rows<ref::dot_q4_k>, ref::quantize_q8_k};
    case TensorType::Q5_K: return {scalar_dot_rows<ref::dot_q5_k>, ref::quantize_q8_k};
    case TensorType::Q6_K: return {scalar_dot_rows<ref::dot_q6_k>, ref::quantize_q8_k};
    default: activation_type(weight);  // throws the unsupported-type error
  }
  return {nullptr, nullptr};
}

RowKernels row_kernels(TensorType weight) {
  RowKernels k = scalar_row_kernels(weight);
  if (use_avx2()) {
    const RowKernels fast = avx2_row_kernels(weight);
    if (fast.dot_rows) k.dot_rows = fast.dot_rows;
    if (fast.quantize_act) k.quantize_act = fast.quantize_act;
  }
  return k;
}

}  // namespace infer::kernels
