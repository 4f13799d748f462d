// ggml tensor type ids as stored in GGUF files, with their block geometry (spec/quant-formats.md §2).
// Container-level facts only: how many bytes a row takes. Decoding lives in src/kernels.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace infer::gguf {

enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

struct TypeTraits {
  std::string_view name;      // "Q4_K"
  uint32_t block_elements;    // elements per block (1 for plain types)
  uint32_t block_bytes;       // bytes per block
};

// Traits of a type id read from a file; nullopt for ids that are unknown or removed.
std::optional<TypeTraits> type_traits(uint32_t type_id);
// Name for display; "type<N>" for unknown ids.
std::string_view type_name(TensorType type);
// Bytes of one row of `n_elements` (must be a multiple of the block size).
uint64_t row_bytes(TensorType type, uint64_t n_elements);

}  // namespace infer::gguf
