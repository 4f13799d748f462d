// AVX2 dot products of Q5_0 and Q5_1 weight rows with Q8_0 activations (BlockQ8_0F; Q5_1: BlockQ8_1F,
// with the codes' sum for its minimum): block_groups_avx2.h's kernels over each format's codes,
// bitwise the scalar references.
#include <cstring>

#include "kernels/avx2_common.h"
#include "kernels/avx2_kernels.h"
#include "kernels/block_groups_avx2.h"
#include "kernels/blocks.h"

namespace infer::kernels::avx2 {

namespace {
// Byte k: 0x10 where bit k of the little-endian u32 qh is set (Q5_0/Q5_1's fifth bits), else 0.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  // Byte k takes qh byte k/8 (the shuffle stays within a 128-bit lane; each lane holds all four).
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The unsigned codes u = nibble | fifth bit·16 (0..31) in element order; a pair of products is within
// 2·31·128, so 4 steps' sums add up in int16 before a madd.
template <class B>
__m256i q5_codes(const B& b) {
  return _mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh));
}

// Q5_0: w = u − 16, S = Σu·y − 16·Σy.
struct CodesQ5_0 {
  using Block = BlockQ5_0;
  using Act = BlockQ8_0F;
  static constexpr bool kSigned = false, kMin = false;
  static constexpr int kBias = 16, kInt16Steps = 4;
  static __m256i row(const Block& b) { return q5_codes(b); }
};

// Q5_1: w = u·d + m; the minimum adds m·(dy·Σy) per block.
struct CodesQ5_1 {
  using Block = BlockQ5_1;
  using Act = BlockQ8_1F;
  static constexpr bool kSigned = false, kMin = true;
  static constexpr int kBias = 0, kInt16Steps = 4;
  static __m256i row(const Block& b) { return q5_codes(b); }
};
}  // namespace

void dot_rows_q5_0(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  dot_rows_dispatch<Groups<CodesQ5_0>::RowKernel>(n, w, act, act_stride, n_rows, out, out_stride);
}

void dot_rows_q5_1(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  dot_rows_dispatch<Groups<CodesQ5_1>::RowKernel>(n, w, act, act_stride, n_rows, out, out_stride);
}

void dot_outputs_q5_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
  Groups<CodesQ5_0>::dot_outputs(n, w, row_bytes, n_w, act, out);
}

void dot_outputs_q5_1(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
  Groups<CodesQ5_1>::dot_outputs(n, w, row_bytes, n_w, act, out);
}

void dot_tile_q5_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ5_0>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_q5_1(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ5_1>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx2
