// Q8_0, Q4_0, Q5_0 and Q5_1 weights × Q8_0 activations (read as BlockQ8_0F; Q5_1: BlockQ8_1F) on
// AVX-512 VNNI: the batch kernel (dot_tile) of the row layout and, for Q8_0/Q4_0 batches of more than
// one pass of rows, of the interleaved layout, for CPUs with AVX-512 VNNI with or without AMX. The AVX2 tile's scheme (block_groups_avx2.h) at twice the
// width over q8_0_q4_0_groups_avx512.h's groups: one VPDPBUSD with 4 activation codes broadcast from
// memory serves 16 weight rows.
#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/avx512/avx512_common.h"
#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/quant/blocks.h"
#include "kernels/x86/avx512/q8_0_q4_0_groups_avx512.h"

namespace infer::kernels::avx512 {

// Internal linkage, as avx512_common.h explains.
namespace {
// Activation rows per pass over a group's transposed blocks: 8 independent VPDPBUSD chains (4 measured
// the same: bench_kernels BM_MatmulPrefill, BM_MatmulBatch; docs/performance.md, Constants).
constexpr int kPassRows = 8;

template <class Codes>
struct VnniPass {
  static constexpr int kRowsUnit = kPassRows;
  using Group = typename Groups<Codes>::Group;
  using Act = typename Codes::Act;

  // Activation rows r0 .. r0 + NR of the slice: acc = acc + float(S)·(dw·dy) per block (Q5_1: acc +
  // (float(S)·(dw·dy) + m·(dy·Σy))), S started from the row's offset term, acc from the earlier
  // slices' sums.
  template <int NR>
  static void rows(const TileSlice<Group>& t, int64_t r0) {
    const Act* y[NR];
    for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const Act*>(t.act + (r0 + r) * t.act_stride) + t.b0;
    const int32_t* off = t.offsets->group(r0) + t.b0 * BlockOffsets::kRows;
    const __mmask16 keep = static_cast<__mmask16>((1u << t.count) - 1);
    float* out = t.out + r0 * t.out_stride;
    __m512 acc[NR];
    for (int r = 0; r < NR; ++r) {
      acc[r] = t.b0 ? _mm512_maskz_loadu_ps(keep, out + r * t.out_stride) : _mm512_setzero_ps();
    }
    const Group* g = t.g;
    for (int64_t b = 0; b < t.nb; ++b) {
      __m512i s[NR];
      for (int r = 0; r < NR; ++r) s[r] = _mm512_set1_epi32(off[b * BlockOffsets::kRows + r]);
      for (int k = 0; k < 8; ++k) {
        const __m512i w = g[b].codes[k];
        for (int r = 0; r < NR; ++r) s[r] = _mm512_dpbusd_epi32(s[r], w, broadcast_word(y[r][b].qs + 4 * k));
      }
      for (int r = 0; r < NR; ++r) {
        const __m512 d = _mm512_mul_ps(g[b].dw, _mm512_set1_ps(y[r][b].d));
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(s[r]), d);
        if constexpr (Codes::kMin) v = _mm512_add_ps(v, _mm512_mul_ps(g[b].m, _mm512_set1_ps(y[r][b].d * y[r][b].s)));
        acc[r] = _mm512_add_ps(acc[r], v);
      }
    }
    for (int r = 0; r < NR; ++r) _mm512_mask_storeu_ps(out + r * t.out_stride, keep, acc[r]);
  }

  // Every row of the slice, kPassRows at a time (a pass: one group of the offsets).
  static void tile_rows(const TileSlice<Group>& t) {
    static_assert(kPassRows == BlockOffsets::kRows);
    int64_t r = 0;
    for (; r + kPassRows <= t.rows; r += kPassRows) rows<kPassRows>(t, r);
    switch (t.rows - r) {
      case 1: rows<1>(t, r); break;
      case 2: rows<2>(t, r); break;
      case 3: rows<3>(t, r); break;
      case 4: rows<4>(t, r); break;
      case 5: rows<5>(t, r); break;
      case 6: rows<6>(t, r); break;
      case 7: rows<7>(t, r); break;
      default: break;
    }
  }
  static void done() {}
};
}  // namespace

void dot_tile_vnni_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ8_0>::dot_tile<false, VnniPass<CodesQ8_0>>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_vnni_interleaved_q8_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ8_0>::dot_tile<true, VnniPass<CodesQ8_0>>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_vnni_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ4_0>::dot_tile<false, VnniPass<CodesQ4_0>>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_vnni_interleaved_q4_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                                    uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ4_0>::dot_tile<true, VnniPass<CodesQ4_0>>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_vnni_q5_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ5_0>::dot_tile<false, VnniPass<CodesQ5_0>>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_vnni_q5_1(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Groups<CodesQ5_1>::dot_tile<false, VnniPass<CodesQ5_1>>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx512
