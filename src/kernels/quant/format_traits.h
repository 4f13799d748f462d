// One row per tensor type the kernels read (as ggml's type_traits, for this project's types): the
// activation format its dot product takes and its scalar references. Block geometry comes from the
// GGUF layer's table (gguf/tensor_type.h); quant.h's functions read both. The optimised kernels of each
// type and instruction set are in matmul/kernel_table.cpp. Adding a weight type: its row here, its row
// there, its kernels, its tests.
#pragma once
#include <cstdint>

#include "gguf/tensor_type.h"

namespace infer::kernels {

struct FormatTraits {
  gguf::TensorType type;
  // A weight type matmul multiplies (false: Q8_K, an activation format only).
  bool weight;
  // The format its dot product reads activations in (spec §7.1); itself for float types.
  gguf::TensorType activation;
  void (*dequantize)(const void* src, float* dst, int64_t n);
  void (*quantize)(const float* src, void* dst, int64_t n);
  // The reference activation rule: Q8_0 activations by llama.cpp's x86 rule (§7.2), the others by
  // `quantize` of the activation type.
  void (*quantize_activation)(const float* src, void* dst, int64_t n);
  // One weight row with one activation row (null where `weight` is false).
  float (*dot)(const void* w, const void* act, int64_t n);
};

// The row of `t`; null for a type the kernels do not read.
const FormatTraits* find_format_traits(gguf::TensorType t);
// The row of `t`; throws std::invalid_argument naming `what` and the type for one they do not read.
const FormatTraits& format_traits(gguf::TensorType t, const char* what);

}  // namespace infer::kernels
