// K-quant batches over the row layout on AVX-512 VNNI, where the weights stay in the file's layout (a
// mapped file is never rewritten; interleave.h): each call gathers its whole groups of 16 weight rows
// into the interleaved layout in scratch, then runs the interleaved layout's batch kernel over them
// once for all its activation rows; the rows after the last whole group take the AVX2 tile. Both give
// bitwise the row kernels' values (invariant 7), so the gather moves speed only.
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx2_kernels.h"
#include "kernels/avx512_common.h"
#include "kernels/avx512_kernels.h"
#include "kernels/blocks.h"
#include "kernels/row_kernels.h"

namespace infer::kernels::avx512 {

// Internal linkage, as avx512_common.h explains.
namespace {

// Groups [0, n_groups) of row-layout rows into the interleaved layout at `out` (interleave.cpp's
// unit format: word k of the 16 rows' block at 64k, then the blocks' tails of `block_bytes` % 4
// bytes, row after row). One gather per word of 16 rows.
void regroup(const uint8_t* w, uint64_t row_bytes, int64_t n_groups, int64_t block_bytes, uint8_t* out) {
  const int64_t n_blocks = static_cast<int64_t>(row_bytes) / block_bytes, words = block_bytes / 4;
  const int64_t tail = block_bytes % 4;
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(static_cast<int32_t>(row_bytes)));
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* group = w + g * kGroupRows * row_bytes;
    uint8_t* unit = out + g * kGroupRows * row_bytes;
    for (int64_t i = 0; i < n_blocks; ++i, unit += kGroupRows * block_bytes) {
      const uint8_t* block = group + i * block_bytes;
      for (int64_t k = 0; k < words; ++k) {
        _mm512_storeu_si512(unit + 64 * k, _mm512_i32gather_epi32(rows, block + 4 * k, 1));
      }
      if (tail == 2) {  // Q6_K's d: the last 2 bytes of each row's block, read as the word ending there
        const __m512i last = _mm512_srli_epi32(_mm512_i32gather_epi32(rows, block + block_bytes - 4, 1), 16);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(unit + 64 * words), _mm512_cvtepi32_epi16(last));
      }
    }
  }
}

template <int64_t kBlockBytes, DotTileFn kInterleaved, DotTileFn kTail>
void dot_tile_regrouped(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  static_assert(kBlockBytes % 4 == 0 || kBlockBytes % 4 == 2);
  thread_local Buffer<uint8_t> scratch;
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t n_groups = n_w / kGroupRows, grouped = n_groups * kGroupRows;
  if (n_groups > 0) {
    scratch.resize(static_cast<size_t>(grouped) * row_bytes);
    regroup(wb, row_bytes, n_groups, kBlockBytes, scratch.data());
    kInterleaved(n, scratch.data(), row_bytes, grouped, act, act_stride, n_rows, out, out_stride);
  }
  if (grouped < n_w) {
    kTail(n, wb + grouped * row_bytes, row_bytes, n_w - grouped, act, act_stride, n_rows, out + grouped, out_stride);
  }
}
}  // namespace

void dot_tile_regrouped_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                             uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile_regrouped<sizeof(BlockQ4_K), dot_rows_interleaved_q4_k, avx2::dot_tile_q4_k>(
      n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_regrouped_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                             uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile_regrouped<sizeof(BlockQ5_K), dot_rows_interleaved_q5_k, avx2::dot_tile_q5_k>(
      n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_regrouped_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                             uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  dot_tile_regrouped<sizeof(BlockQ6_K), dot_rows_interleaved_q6_k, avx2::dot_tile_q6_k>(
      n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx512
