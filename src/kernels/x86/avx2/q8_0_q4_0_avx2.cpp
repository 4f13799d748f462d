// AVX2 dot products of Q8_0 and Q4_0 weight rows with Q8_0 activations (BlockQ8_0F: the scale as a
// float): block_groups_avx2.h's kernels over each format's codes, bitwise the scalar references.
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx2/block_groups_avx2.h"
#include "kernels/quant/blocks.h"

namespace infer::kernels::avx2 {

namespace {
// Q8_0: the signed codes; the product takes maddubs(|w|, sign(y, w)).
struct CodesQ8_0 {
  using Block = BlockQ8_0;
  using Act = BlockQ8_0F;
  static constexpr bool kSigned = true, kMin = false;
  static constexpr int kBias = 0, kInt16Steps = 1;
  static __m256i row(const Block& b) { return load(b.qs); }
};

// Q4_0: the unsigned nibbles u = code + 8 in element order (low nibbles, then high); maddubs(u, y)
// needs no sign step, and S = Σu·y − 8·Σy. A block's Σu·y pairs stay within int16 (8 · 2·15·128).
struct CodesQ4_0 {
  using Block = BlockQ4_0;
  using Act = BlockQ8_0F;
  static constexpr bool kSigned = false, kMin = false;
  static constexpr int kBias = 8, kInt16Steps = 8;
  static __m256i row(const Block& b) { return nibbles(b.qs); }
};

}  // namespace

void dot_rows_q8_0(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  dot_rows_dispatch<Groups<CodesQ8_0>::RowKernel>(n, w, act, act_stride, n_rows, out, out_stride);
}

void dot_rows_q4_0(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  dot_rows_dispatch<Groups<CodesQ4_0>::RowKernel>(n, w, act, act_stride, n_rows, out, out_stride);
}

void dot_outputs_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
  Groups<CodesQ8_0>::dot_outputs(n, w, row_bytes, n_w, act, out);
}

void dot_outputs_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
  Groups<CodesQ4_0>::dot_outputs(n, w, row_bytes, n_w, act, out);
}

void dot_tile_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ8_0>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ4_0>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx2
