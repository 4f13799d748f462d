// quant.h's block geometry per type, and its type dispatch to the scalar references
// (reference_kernels.h).
#include "kernels/quant/quant.h"

#include <stdexcept>
#include <string>

#include "kernels/quant/reference_kernels.h"

namespace infer::kernels {

namespace {
[[noreturn]] void unsupported(const char* what, TensorType t) {
  throw std::invalid_argument(std::string(what) + ": unsupported tensor type id " +
                              std::to_string(static_cast<uint32_t>(t)));
}

void check_blocks(TensorType t, int64_t n) {
  const int64_t blk = block_elements(t);
  if (n < 0 || n % blk != 0) {
    throw std::invalid_argument("row of " + std::to_string(n) + " elements is not a multiple of type " +
                                std::to_string(static_cast<uint32_t>(t)) + "'s block of " +
                                std::to_string(blk));
  }
}
}  // namespace

int64_t block_elements(TensorType t) {
  switch (t) {
    case TensorType::F32: case TensorType::F16: case TensorType::BF16: return 1;
    case TensorType::Q8_0: case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q5_1: return 32;
    case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K: case TensorType::Q8_K: return 256;
    default: unsupported("block_elements", t);
  }
}

uint64_t block_bytes(TensorType t) {
  switch (t) {
    case TensorType::F32: return 4;
    case TensorType::F16: case TensorType::BF16: return 2;
    case TensorType::Q8_0: return 34;
    case TensorType::Q4_0: return 18;
    case TensorType::Q5_0: return 22;
    case TensorType::Q5_1: return 24;
    case TensorType::Q4_K: return 144;
    case TensorType::Q5_K: return 176;
    case TensorType::Q6_K: return 210;
    case TensorType::Q8_K: return 292;
    default: unsupported("block_bytes", t);
  }
}

uint64_t quant_row_bytes(TensorType t, int64_t n) {
  check_blocks(t, n);
  return static_cast<uint64_t>(n / block_elements(t)) * block_bytes(t);
}

bool is_supported_weight_type(TensorType t) {
  switch (t) {
    case TensorType::F32: case TensorType::F16: case TensorType::BF16: case TensorType::Q8_0:
    case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q5_1: case TensorType::Q4_K:
    case TensorType::Q5_K: case TensorType::Q6_K:
      return true;
    default:
      return false;
  }
}

void dequantize_row(TensorType t, const void* src, float* dst, int64_t n) {
  check_blocks(t, n);
  switch (t) {
    case TensorType::F32: for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<const float*>(src)[i]; return;
    case TensorType::F16: return ref::dequantize_f16(src, dst, n);
    case TensorType::BF16: return ref::dequantize_bf16(src, dst, n);
    case TensorType::Q8_0: return ref::dequantize_q8_0(src, dst, n);
    case TensorType::Q4_0: return ref::dequantize_q4_0(src, dst, n);
    case TensorType::Q5_0: return ref::dequantize_q5_0(src, dst, n);
    case TensorType::Q5_1: return ref::dequantize_q5_1(src, dst, n);
    case TensorType::Q4_K: return ref::dequantize_q4_k(src, dst, n);
    case TensorType::Q5_K: return ref::dequantize_q5_k(src, dst, n);
    case TensorType::Q6_K: return ref::dequantize_q6_k(src, dst, n);
    case TensorType::Q8_K: return ref::dequantize_q8_k(src, dst, n);
    default: unsupported("dequantize_row", t);
  }
}

void quantize_row(TensorType t, const float* src, void* dst, int64_t n) {
  check_blocks(t, n);
  switch (t) {
    case TensorType::F32: for (int64_t i = 0; i < n; ++i) static_cast<float*>(dst)[i] = src[i]; return;
    case TensorType::F16: return ref::quantize_f16(src, dst, n);
    case TensorType::BF16: return ref::quantize_bf16(src, dst, n);
    case TensorType::Q8_0: return ref::quantize_q8_0(src, dst, n);
    case TensorType::Q4_0: return ref::quantize_q4_0(src, dst, n);
    case TensorType::Q5_0: return ref::quantize_q5_0(src, dst, n);
    case TensorType::Q5_1: return ref::quantize_q5_1(src, dst, n);
    case TensorType::Q4_K: return ref::quantize_q4_k(src, dst, n);
    case TensorType::Q5_K: return ref::quantize_q5_k(src, dst, n);
    case TensorType::Q6_K: return ref::quantize_q6_k(src, dst, n);
    case TensorType::Q8_K: return ref::quantize_q8_k(src, dst, n);
    default: unsupported("quantize_row", t);
  }
}

TensorType activation_type(TensorType weight) {
  switch (weight) {
    case TensorType::F32: case TensorType::F16: case TensorType::BF16: return weight;
    case TensorType::Q8_0: case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q5_1:
      return TensorType::Q8_0;
    case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K: return TensorType::Q8_K;
    default: unsupported("activation_type", weight);
  }
}

uint64_t activation_bytes(TensorType weight, int64_t n) {
  return quant_row_bytes(activation_type(weight), n);
}

void quantize_activation_row(TensorType weight, const float* src, void* dst, int64_t n) {
  const TensorType a = activation_type(weight);
  check_blocks(weight, n);
  if (a == TensorType::Q8_0) return ref::quantize_q8_0_activation(src, dst, n);
  quantize_row(a, src, dst, n);
}

float dot_ref(TensorType weight, const void* w, const void* act, int64_t n) {
  check_blocks(weight, n);
  switch (weight) {
    case TensorType::F32: return ref::dot_f32(w, act, n);
    case TensorType::F16: return ref::dot_f16(w, act, n);
    case TensorType::BF16: return ref::dot_bf16(w, act, n);
    case TensorType::Q8_0: return ref::dot_q8_0(w, act, n);
    case TensorType::Q4_0: return ref::dot_q4_0(w, act, n);
    case TensorType::Q5_0: return ref::dot_q5_0(w, act, n);
    case TensorType::Q5_1: return ref::dot_q5_1(w, act, n);
    case TensorType::Q4_K: return ref::dot_q4_k(w, act, n);
    case TensorType::Q5_K: return ref::dot_q5_k(w, act, n);
    case TensorType::Q6_K: return ref::dot_q6_k(w, act, n);
    default: unsupported("dot_ref", weight);
  }
}

}  // namespace infer::kernels
