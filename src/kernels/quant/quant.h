// Weight and activation block formats, bit-compatible with GGUF files as llama.cpp writes them
// (spec/quant-formats.md §3–§5, §7–§8): F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, and
// the activation formats Q8_0 / Q8_K that the integer dot products take.
//
// Every function here is a scalar reference; optimised versions live next to them (`*_avx2.cpp`) and are
// reached through matmul.h, which dispatches on the CPU's features at run time.
// Units: `n` is a count of elements and must be a multiple of the type's block size.
#pragma once
#include <cstdint>

#include "gguf/tensor_type.h"

namespace infer::kernels {

using gguf::TensorType;

// IEEE half / bfloat16 conversion (§8). f32→f16 rounds to nearest even; f32→bf16 rounds to nearest
// even with NaN kept quiet, exactly as ggml does.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

// True when this project can dequantise and dot this weight type.
bool is_supported_weight_type(TensorType t);

// Block geometry of the types above (and Q8_K); throw std::invalid_argument for other types.
int64_t block_elements(TensorType t);
uint64_t block_bytes(TensorType t);
// Bytes of a row of `n` elements; throws std::invalid_argument unless n is a multiple of the block.
uint64_t quant_row_bytes(TensorType t, int64_t n);

// Reference dequantisation of `n` elements at `src` (one or more whole blocks) into `dst`.
void dequantize_row(TensorType t, const void* src, float* dst, int64_t n);
// Reference quantisation of `n` floats into blocks of type `t` (used by `infer synth` and for
// activations). Matches ggml's reference quantisers bit for bit where the spec gives the algorithm
// (F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q8_K). Q4_K/Q5_K use a plain min/max fit per sub-block and Q6_K
// the first step of ggml's search: always valid blocks, a little less accurate than llama-quantize's.
// Functions here throw std::invalid_argument for unsupported types or n not a multiple of the block.
void quantize_row(TensorType t, const float* src, void* dst, int64_t n);

// The format a weight type's dot product wants its activations in (§7.1): Q8_0 for Q8_0, Q4_0, Q5_0
// and Q5_1 (llama.cpp gives Q5_1 Q8_1 blocks; see ref::dot_q5_1), Q8_K for the K-quants, F16 for F16,
// BF16 for BF16, F32 for F32.
TensorType activation_type(TensorType weight);
// Bytes needed to hold `n` activations in activation_type(weight).
uint64_t activation_bytes(TensorType weight, int64_t n);
// Converts one activation row into activation_type(weight) (reference; the optimised path is in matmul).
// Q8_0 activations follow llama.cpp's x86 AVX2 rule (id = 127/amax, ties to even, §7.2), which the
// AVX2 path reproduces bit for bit; quantize_row(Q8_0) keeps the reference weight rule (roundf).
void quantize_activation_row(TensorType weight, const float* src, void* dst, int64_t n);

// Reference dot product of one weight row (type `weight`) with one activation row already in
// activation_type(weight). Quantised types: an exact integer sum per block (super-block: scales and
// mins applied in integers, §7.3), then f32 scaling accumulated block by block in order. Float types
// accumulate in double. The AVX2 kernels give the same integer sums and differ only in the f32
// accumulation order: within 1e-5 · Σ|w·x| of this value (tests/kernels/test_avx2_kernels.cpp).
float dot_ref(TensorType weight, const void* w, const void* act, int64_t n);

}  // namespace infer::kernels
