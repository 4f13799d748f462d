// The table of format_traits.h, and quant.h's functions over it.
#include "kernels/quant/format_traits.h"

#include <array>
#include <stdexcept>
#include <string>

#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"

namespace infer::kernels {

namespace {
void copy_f32(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<const float*>(src)[i];
}
void copy_to_f32(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(dst)[i] = src[i];
}

using T = TensorType;
constexpr FormatTraits kFormats[] = {
    {T::F32, true, T::F32, copy_f32, copy_to_f32, copy_to_f32, ref::dot_f32},
    {T::F16, true, T::F16, ref::dequantize_f16, ref::quantize_f16, ref::quantize_f16, ref::dot_f16},
    {T::BF16, true, T::BF16, ref::dequantize_bf16, ref::quantize_bf16, ref::quantize_bf16, ref::dot_bf16},
    {T::Q8_0, true, T::Q8_0, ref::dequantize_q8_0, ref::quantize_q8_0, ref::quantize_q8_0_activation, ref::dot_q8_0},
    {T::Q4_0, true, T::Q8_0, ref::dequantize_q4_0, ref::quantize_q4_0, ref::quantize_q8_0_activation, ref::dot_q4_0},
    {T::Q5_0, true, T::Q8_0, ref::dequantize_q5_0, ref::quantize_q5_0, ref::quantize_q8_0_activation, ref::dot_q5_0},
    // llama.cpp gives Q5_1 Q8_1 blocks; the same codes and scale as Q8_0's (see ref::dot_q5_1)
    {T::Q5_1, true, T::Q8_0, ref::dequantize_q5_1, ref::quantize_q5_1, ref::quantize_q8_0_activation, ref::dot_q5_1},
    {T::Q4_K, true, T::Q8_K, ref::dequantize_q4_k, ref::quantize_q4_k, ref::quantize_q8_k, ref::dot_q4_k},
    {T::Q5_K, true, T::Q8_K, ref::dequantize_q5_k, ref::quantize_q5_k, ref::quantize_q8_k, ref::dot_q5_k},
    {T::Q6_K, true, T::Q8_K, ref::dequantize_q6_k, ref::quantize_q6_k, ref::quantize_q8_k, ref::dot_q6_k},
    {T::Q8_K, false, T::Q8_K, ref::dequantize_q8_k, ref::quantize_q8_k, ref::quantize_q8_k, nullptr},
};

constexpr uint32_t kTypeIds = 64;  // above every ggml type id (spec §2)
constexpr auto kById = [] {
  std::array<const FormatTraits*, kTypeIds> by_id{};
  for (const FormatTraits& f : kFormats) by_id[static_cast<uint32_t>(f.type)] = &f;
  return by_id;
}();

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

const FormatTraits* find_format_traits(TensorType t) {
  const auto id = static_cast<uint32_t>(t);
  return id < kTypeIds ? kById[id] : nullptr;
}

const FormatTraits& format_traits(TensorType t, const char* what) {
  const FormatTraits* f = find_format_traits(t);
  if (!f) unsupported(what, t);
  return *f;
}

bool is_supported_weight_type(TensorType t) {
  const FormatTraits* f = find_format_traits(t);
  return f && f->weight;
}

int64_t block_elements(TensorType t) {
  format_traits(t, "block_elements");
  return gguf::type_traits(static_cast<uint32_t>(t))->block_elements;
}

uint64_t block_bytes(TensorType t) {
  format_traits(t, "block_bytes");
  return gguf::type_traits(static_cast<uint32_t>(t))->block_bytes;
}

uint64_t quant_row_bytes(TensorType t, int64_t n) {
  check_blocks(t, n);
  return static_cast<uint64_t>(n / block_elements(t)) * block_bytes(t);
}

void dequantize_row(TensorType t, const void* src, float* dst, int64_t n) {
  const FormatTraits& f = format_traits(t, "dequantize_row");
  check_blocks(t, n);
  f.dequantize(src, dst, n);
}

void quantize_row(TensorType t, const float* src, void* dst, int64_t n) {
  const FormatTraits& f = format_traits(t, "quantize_row");
  check_blocks(t, n);
  f.quantize(src, dst, n);
}

TensorType activation_type(TensorType weight) {
  const FormatTraits& f = format_traits(weight, "activation_type");
  if (!f.weight) unsupported("activation_type", weight);
  return f.activation;
}

uint64_t activation_bytes(TensorType weight, int64_t n) {
  return quant_row_bytes(activation_type(weight), n);
}

void quantize_activation_row(TensorType weight, const float* src, void* dst, int64_t n) {
  const FormatTraits& f = format_traits(weight, "quantize_activation_row");
  if (!f.weight) unsupported("quantize_activation_row", weight);
  check_blocks(weight, n);
  f.quantize_activation(src, dst, n);
}

float dot_ref(TensorType weight, const void* w, const void* act, int64_t n) {
  const FormatTraits& f = format_traits(weight, "dot_ref");
  if (!f.weight) unsupported("dot_ref", weight);
  check_blocks(weight, n);
  return f.dot(w, act, n);
}

}  // namespace infer::kernels
