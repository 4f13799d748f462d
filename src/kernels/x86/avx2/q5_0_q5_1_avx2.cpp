// AVX2 dot products of Q5_0 and Q5_1 weight rows with Q8_0 activations (BlockQ8_0F; Q5_1: BlockQ8_1F,
// with the codes' sum for its minimum): block_groups_avx2.h's kernels over each format's codes,
// bitwise the scalar references.
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/block_codes.h"
#include "kernels/x86/avx2/block_groups_avx2.h"
#include "kernels/quant/blocks.h"

namespace infer::kernels::avx2 {

namespace {
// Q5_0 and Q5_1: the codes u = nibble | fifth bit·16 (block_codes.h); Q5_0's w = u − 16 (S = Σu·y −
// 16·Σy), Q5_1's w = u·d + m (its minimum adds m·(dy·Σy) per block). A pair of products reaches
// 2·31·127, so 4 steps' sums add up in int16 before a madd.
template <class B, class A, int kB>
struct CodesQ5 {
  using Block = B;
  using Act = A;
  static constexpr bool kSigned = false, kMin = kB == 0;
  static constexpr int kBias = kB, kInt16Steps = 4;
  static __m256i row(const Block& b) { return q5_codes(b); }
};
using CodesQ5_0 = CodesQ5<BlockQ5_0, BlockQ8_0F, 16>;
using CodesQ5_1 = CodesQ5<BlockQ5_1, BlockQ8_1F, 0>;
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
