// Storage formats for the vectors of a vector set, and the cosine distance between two stored vectors.
// Every vector is L2-normalised before it is encoded, so cosine similarity is a dot product.
// Distances are 1 - cos, in [0, 2]; scores shown to users are 1 - distance/2, in [0, 1].
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace infer::vector {

enum class Quant : uint8_t {
  F32 = 0,  // NOQUANT: float32, 4·dim bytes
  Q8 = 1,   // int8 (largest component ±127) with one float scale per vector (1/|q|): 4 + dim bytes
  Bin = 2,  // sign bits: ceil(dim/8) bytes; cosine estimated from the Hamming distance
};

const char* quant_name(Quant q);       // "f32", "int8", "bin" (VINFO quant-type)
const char* quant_raw_name(Quant q);   // "fp32", "q8", "bin" (VEMB RAW)
std::optional<Quant> quant_from_byte(uint8_t b);

// Bytes one encoded vector of `dim` components takes.
size_t encoded_size(Quant q, size_t dim);

// Encodes a unit-length vector `x` (dim = x.size()) into `out` (encoded_size bytes). No allocation.
void encode(Quant q, const float* x, size_t dim, uint8_t* out);
// True when `in` could be what encode() wrote: finite, unit length (within 1%) or all zero. Loaders use
// it so that a forged vector cannot make distances NaN or unbounded.
bool plausible_encoding(Quant q, const uint8_t* in, size_t dim);
// Decodes back to floats (still unit length, up to quantisation error).
void decode(Quant q, const uint8_t* in, size_t dim, float* out);

// 1 - cos between two encoded vectors of the same format.
float distance(Quant q, const uint8_t* a, const uint8_t* b, size_t dim);
// The same as a function pointer chosen once per set (AVX2/FMA when the CPU has it, else scalar): the HNSW
// hot loops call it without a switch per distance.
using DistanceFn = float (*)(const uint8_t* a, const uint8_t* b, size_t dim);
DistanceFn distance_fn(Quant q);
// The scalar version, whatever the CPU (tests compare the two).
DistanceFn reference_distance_fn(Quant q);

// Scales `x` to unit length in place and returns the original L2 norm (0 leaves x unchanged). The norm
// is a double: it may be beyond the float range even when every component is a finite float.
double normalize(float* x, size_t dim);

// The largest L2 norm a stored vector may have: its norm is kept as a float, and decoding multiplies
// unit components (up to quantisation error, a little above 1) by it.
inline constexpr double kMaxVectorNorm = 1e38;

}  // namespace infer::vector
