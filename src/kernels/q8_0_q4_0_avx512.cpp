// Q8_0, Q4_0, Q5_0 and Q5_1 weights × Q8_0 activations (read as BlockQ8_0F; Q5_1: BlockQ8_1F) on
// AVX-512 VNNI: the batch kernel (dot_tile) of the row layout and, for Q8_0/Q4_0 batches of more than
// one pass of rows, of the interleaved layout, for CPUs with AVX-512 VNNI with or without AMX. The AVX2 tile's scheme (block_groups_avx2.h) at twice the
// width over q8_0_q4_0_groups_avx512.h's groups: one VPDPBUSD with 4 activation codes broadcast from
// memory serves 16 weight rows.
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx512_common.h"
#include "kernels/avx512_kernels.h"
#include "kernels/blocks.h"
#include "kernels/q8_0_q4_0_groups_avx512.h"

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

  // Activation rows y0[0..NR) against the group's blocks g[0..nb): acc = acc + float(S)·(dw·dy) per
  // block (Q5_1: acc + (float(S)·(dw·dy) + m·(dy·Σy))), S started from −offset (off: the rows'
  // group of BlockOffsets).
  template <int NR>
  static void rows(const Group* g, int64_t nb, const Act* const (&y0)[NR], const int32_t* off, int64_t count,
                   float* out, int64_t out_stride) {
    __m512 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      __m512i s[NR];
      for (int r = 0; r < NR; ++r) s[r] = _mm512_set1_epi32(off[b * BlockOffsets::kRows + r]);
      for (int k = 0; k < 8; ++k) {
        const __m512i w = g[b].codes[k];
        for (int r = 0; r < NR; ++r) s[r] = _mm512_dpbusd_epi32(s[r], w, broadcast_word(y0[r][b].qs + 4 * k));
      }
      for (int r = 0; r < NR; ++r) {
        const __m512 d = _mm512_mul_ps(g[b].dw, _mm512_set1_ps(y0[r][b].d));
        __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s[r]), d);
        if constexpr (Codes::kMin) t = _mm512_add_ps(t, _mm512_mul_ps(g[b].m, _mm512_set1_ps(y0[r][b].d * y0[r][b].s)));
        acc[r] = _mm512_add_ps(acc[r], t);
      }
    }
    const __mmask16 keep = static_cast<__mmask16>((1u << count) - 1);
    for (int r = 0; r < NR; ++r) _mm512_mask_storeu_ps(out + r * out_stride, keep, acc[r]);
  }

  template <int NR>
  static void pass(const Group* g, int64_t nb, const uint8_t* a, uint64_t act_stride, const int32_t* off,
                   int64_t count, float* out, int64_t out_stride) {
    const Act* y[NR];
    for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const Act*>(a + r * act_stride);
    rows<NR>(g, nb, y, off, count, out, out_stride);
  }

  // Every row of a tile, kPassRows at a time (a pass: one group of the offsets).
  static void tile_rows(const Group* g, int64_t nb, const uint8_t* a, uint64_t act_stride,
                        const BlockOffsets& offsets, int64_t tr, int64_t count, float* out, int64_t out_stride) {
    static_assert(kPassRows == BlockOffsets::kRows);
    int64_t r = 0;
    for (; r + kPassRows <= tr; r += kPassRows) {
      pass<kPassRows>(g, nb, a + r * act_stride, act_stride, offsets.group(r), count, out + r * out_stride,
                      out_stride);
    }
    const uint8_t* ar = a + r * act_stride;
    const int32_t* off = offsets.group(r);
    float* o_r = out + r * out_stride;
    switch (tr - r) {
      case 1: pass<1>(g, nb, ar, act_stride, off, count, o_r, out_stride); break;
      case 2: pass<2>(g, nb, ar, act_stride, off, count, o_r, out_stride); break;
      case 3: pass<3>(g, nb, ar, act_stride, off, count, o_r, out_stride); break;
      case 4: pass<4>(g, nb, ar, act_stride, off, count, o_r, out_stride); break;
      case 5: pass<5>(g, nb, ar, act_stride, off, count, o_r, out_stride); break;
      case 6: pass<6>(g, nb, ar, act_stride, off, count, o_r, out_stride); break;
      case 7: pass<7>(g, nb, ar, act_stride, off, count, o_r, out_stride); break;
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
