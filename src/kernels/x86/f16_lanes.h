// Eight f16 values read one by one (a block's scale from each of eight rows) as the eight lanes of a
// vector, packed four to a general register on the way: the kernels that read them keep the vector
// units busy and the integer ones idle, and AMD's gathers cost more than the work beside them
// (BM_AttentionStepQwen3Shape/96/1/1). Internal linkage: AVX2 and AVX-512 files both include this
// (avx512_common.h explains why).
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace infer::kernels {
namespace {

// Lane i (of 8 16-bit lanes): value(i), for i = 0..7.
template <class Value>
inline __m128i f16_lanes8(Value value) {
  const auto four = [&](int i) {
    return static_cast<long long>(uint64_t{value(i)} | uint64_t{value(i + 1)} << 16 | uint64_t{value(i + 2)} << 32 |
                                  uint64_t{value(i + 3)} << 48);
  };
  return _mm_set_epi64x(four(4), four(0));
}

}  // namespace
}  // namespace infer::kernels
