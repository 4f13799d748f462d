// F32, F16 and BF16 rows: conversions and reference dot products (accumulated in double, in order).
#include <cstring>

#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels::ref {

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}

float dot_f32(const void* w, const void* act, int64_t n) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(act);
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(acc);
}

float dot_f16(const void* w, const void* act, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(act);
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(f16_to_f32(a[i])) * f16_to_f32(b[i]);
  return static_cast<float>(acc);
}

float dot_bf16(const void* w, const void* act, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(act);
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(bf16_to_f32(a[i])) * bf16_to_f32(b[i]);
  return static_cast<float>(acc);
}

}  // namespace infer::kernels::ref
