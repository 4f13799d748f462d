// AVX2 dot products of Q5_0 and Q5_1 weight rows with Q8_0 activations (several rows at once), read
// as BlockQ8_0F (Q5_1: BlockQ8_1F, with the codes' sum) so that the activation scale costs one
// broadcast per block and row. A block decodes to 32 signed codes; the product uses maddubs on |w| and
// sign(y, w). Per (weight row, activation row): even blocks into one accumulator, odd into another,
// each in block order, acc += (dw·dy)·float(sum); the result is hsum(acc_even + acc_odd), plus for
// Q5_1 the min term: even blocks into one f32 and odd into another, each in block order,
// msum = fma(m·dy, float(Σy), msum), added as (msum_even + msum_odd). dw·dy and m·dy are exact in f32
// (products of two f16 values), so the batch tile may form them once per block for all its rows.
#include <algorithm>
#include <cstring>

#include "kernels/avx2_common.h"
#include "kernels/avx2_kernels.h"
#include "kernels/blocks.h"

namespace infer::kernels::avx2 {

namespace {
// Bytes 0..15: the low nibbles of qs[0..15] (elements 0..15); bytes 16..31: their high nibbles.
inline __m256i nibbles(const uint8_t* qs) {
  // Both 128-bit lanes get the 16 bytes; the high lane is shifted down to its high nibbles.
  const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_srlv_epi32(q, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F));
}

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

struct DecodeQ5_0 {
  using Block = BlockQ5_0;
  using Act = BlockQ8_0F;
  static constexpr bool kHasMin = false;
  static __m256i codes(const Block& b) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh)), _mm256_set1_epi8(16));
  }
};

// Codes 0..31 unbiased; the minimum adds m·dy·Σy per block (the min term above).
struct DecodeQ5_1 {
  using Block = BlockQ5_1;
  using Act = BlockQ8_1F;
  static constexpr bool kHasMin = true;
  static __m256i codes(const Block& b) { return _mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh)); }
};

inline float fma_ss(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// Blocks alternate between two accumulators per row (halves the FMA dependency chain); the row's
// result is hsum(acc0 + acc1).
template <class Decode>
struct Q8Act {
  template <int NR>
  struct Kernel {
    static void run(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, float* out,
                    int64_t out_stride) {
      const auto* x = static_cast<const typename Decode::Block*>(w);
      using Act = typename Decode::Act;
      const Act* y[NR];
      for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const Act*>(act + r * act_stride);
      const __m256i ones = _mm256_set1_epi16(1);
      __m256 acc0[NR], acc1[NR];
      float msum0[NR], msum1[NR];
      for (int r = 0; r < NR; ++r) {
        acc0[r] = acc1[r] = _mm256_setzero_ps();
        msum0[r] = msum1[r] = 0.0f;
      }
      const int64_t nb = n / kQK0;
      auto block = [&](int64_t b, __m256* acc, float* msum) {
        const __m256i wq = Decode::codes(x[b]);
        const __m256i wabs = _mm256_sign_epi8(wq, wq);
        const __m256 dw = _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(x[b].d)));
        for (int r = 0; r < NR; ++r) {
          const __m256i ys = _mm256_sign_epi8(load(y[r][b].qs), wq);
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, ys), ones);
          const __m256 d = _mm256_mul_ps(dw, _mm256_broadcast_ss(&y[r][b].d));
          acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[r]);
          if constexpr (Decode::kHasMin) msum[r] = fma_ss(f16(x[b].m) * y[r][b].d, y[r][b].s, msum[r]);
        }
      };
      int64_t b = 0;
      for (; b + 1 < nb; b += 2) {
        // 8 KiB ahead: a decode streams whole matrices, and shorter distances left the loads waiting on
        // memory (infer bench decode share; docs/performance.md, Constants).
        _mm_prefetch(reinterpret_cast<const char*>(&x[b]) + 8192, _MM_HINT_T0);
        block(b, acc0, msum0);
        block(b + 1, acc1, msum1);
      }
      if (b < nb) block(b, acc0, msum0);
      for (int r = 0; r < NR; ++r) {
        out[r * out_stride] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
        if constexpr (Decode::kHasMin) out[r * out_stride] += msum0[r] + msum1[r];
      }
    }
  };
};

// Decode (one activation row) of Q5_0, bitwise Q8Act<DecodeQ5_0>::Kernel<1> per weight row: the same
// lane sums and the same float operations in the same order. The codes stay unsigned (nibble | fifth
// bit·16, so maddubs needs no sign steps) and the −16 bias comes off each lane's exact sum as 16·Σy over
// its 4 elements, formed once per call for all weight rows, like the activation scales dy; dw·dy
// (exact) is formed 8 blocks at a time before each row.
constexpr int64_t kDecodeMaxBlocks = 512;  // larger rows take the row kernel (stack space)

void dot_outputs_q5_0_impl(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                           float* out) {
  const int64_t nb = n / kQK0;
  const auto* y = reinterpret_cast<const BlockQ8_0F*>(act);
  const __m256i ones = _mm256_set1_epi16(1);
  alignas(32) __m256i bias[kDecodeMaxBlocks];  // lane l: 16·Σy over elements 4l..4l+3 (as codes() orders them)
  alignas(32) float dy[kDecodeMaxBlocks];
  alignas(32) float scale[kDecodeMaxBlocks];
  for (int64_t b = 0; b < nb; ++b) {
    bias[b] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(16), load(y[b].qs)), ones);
    dy[b] = y[b].d;
  }
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int64_t o = 0; o < n_w; ++o) {
    const auto* x = reinterpret_cast<const BlockQ5_0*>(wb + o * row_bytes);
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
      const BlockQ5_0* blk[8];
      for (int i = 0; i < 8; ++i) blk[i] = &x[b + i];
      _mm256_store_ps(scale + b, _mm256_mul_ps(block_scales8(blk), _mm256_load_ps(dy + b)));
    }
    for (; b < nb; ++b) scale[b] = f16(x[b].d) * dy[b];
    const auto block = [&](int64_t i, __m256 acc) {
      const __m256i u = _mm256_or_si256(nibbles(x[i].qs), fifth_bits(x[i].qh));
      const __m256i p = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u, load(y[i].qs)), ones), bias[i]);
      return _mm256_fmadd_ps(_mm256_broadcast_ss(scale + i), _mm256_cvtepi32_ps(p), acc);
    };
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (b = 0; b + 1 < nb; b += 2) {
      // 8 KiB ahead, as in the row kernel.
      _mm_prefetch(reinterpret_cast<const char*>(&x[b]) + 8192, _MM_HINT_T0);
      acc0 = block(b, acc0);
      acc1 = block(b + 1, acc1);
    }
    if (b < nb) acc0 = block(b, acc0);
    out[o] = hsum(_mm256_add_ps(acc0, acc1));
  }
}

// Batch tiles: kTileRows activation rows per pass over a weight row, its even blocks then its odd
// ones (one accumulator each per row: 8 of the 16 registers), over k-blocks of kBlockBlocks blocks
// whose activation rows stay in L1, for a sub-tile of weight rows that stays in L2 (bench_kernels
// BM_MatmulPrefill; figures in docs/performance.md, "Q5_0 and Q5_1").
constexpr int kTileRows = 8;
constexpr int64_t kBlockBlocks = 64;  // even: a k-block starts on an even block
constexpr uint64_t kSubTileBytes = 128 * 1024;
constexpr int64_t kSubTileRows = 64;

template <class Decode>
struct Q8Tile {
  using Block = typename Decode::Block;
  using Act = typename Decode::Act;

  // Blocks b = first, first + 2, .. < end of one weight row against NR rows; scale[b - b0][r] = dw·dy.
  template <int NR>
  static void pass(const Block* x, const Act* const (&y)[NR], const float (*scale)[kTileRows], int64_t b0,
                   int64_t first, int64_t end, __m256* state) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = state[r];
    for (int64_t b = first; b < end; b += 2) {
      const __m256i wq = Decode::codes(x[b]);
      const __m256i wabs = _mm256_sign_epi8(wq, wq);
      for (int r = 0; r < NR; ++r) {
        const __m256i ys = _mm256_sign_epi8(load(y[r][b].qs), wq);
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, ys), ones);
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale[b - b0][r]), _mm256_cvtepi32_ps(p), acc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) state[r] = acc[r];
  }

  // Weight rows [0, n_w) of a sub-tile against activation rows [0, NR).
  template <int NR>
  static void tile_rows(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, float* out, int64_t out_stride) {
    const Act* y[NR];
    for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const Act*>(act + r * act_stride);
    __m256 state[kSubTileRows][2][NR];
    for (int64_t o = 0; o < n_w; ++o) {
      for (int r = 0; r < NR; ++r) state[o][0][r] = state[o][1][r] = _mm256_setzero_ps();
    }
    alignas(32) float dy[kBlockBlocks][kTileRows] = {};
    alignas(32) float scale[kBlockBlocks][kTileRows];
    // Formats with a minimum: Σy per block and row (lanes = rows), and per weight row the min terms.
    alignas(32) float ysum[Decode::kHasMin ? kBlockBlocks : 1][kTileRows] = {};
    __m256 msum[Decode::kHasMin ? kSubTileRows : 1][2];
    for (auto& m : msum) m[0] = m[1] = _mm256_setzero_ps();
    const int64_t nb = n / kQK0;
    for (int64_t b0 = 0; b0 < nb; b0 += kBlockBlocks) {
      const int64_t b1 = std::min(nb, b0 + kBlockBlocks);
      for (int64_t b = b0; b < b1; ++b) {
        for (int r = 0; r < NR; ++r) dy[b - b0][r] = y[r][b].d;
        if constexpr (Decode::kHasMin) {
          for (int r = 0; r < NR; ++r) ysum[b - b0][r] = y[r][b].s;
        }
      }
      for (int64_t o = 0; o < n_w; ++o) {
        const auto* x = reinterpret_cast<const Block*>(w + o * row_bytes);
        for (int64_t b = b0; b < b1; ++b) {
          const __m256 dw = _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(x[b].d)));
          _mm256_store_ps(scale[b - b0], _mm256_mul_ps(dw, _mm256_load_ps(dy[b - b0])));
          if constexpr (Decode::kHasMin) {
            const __m256 md = _mm256_mul_ps(_mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(x[b].m))),
                                            _mm256_load_ps(dy[b - b0]));
            msum[o][b & 1] = _mm256_fmadd_ps(md, _mm256_load_ps(ysum[b - b0]), msum[o][b & 1]);
          }
        }
        pass<NR>(x, y, scale, b0, b0, b1, state[o][0]);
        pass<NR>(x, y, scale, b0, b0 + 1, b1, state[o][1]);
      }
    }
    for (int64_t o = 0; o < n_w; ++o) {
      alignas(32) float m[kTileRows] = {};
      if constexpr (Decode::kHasMin) _mm256_store_ps(m, _mm256_add_ps(msum[o][0], msum[o][1]));
      for (int r = 0; r < NR; ++r) {
        out[r * out_stride + o] = hsum(_mm256_add_ps(state[o][0][r], state[o][1][r]));
        if constexpr (Decode::kHasMin) out[r * out_stride + o] += m[r];
      }
    }
  }

  static void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
    dot_sub_tiles<kTileRows, Q8Tile>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride, kSubTileBytes,
                                     kSubTileRows);
  }
};

template <int NR> using Q5_0Kernel = Q8Act<DecodeQ5_0>::Kernel<NR>;
template <int NR> using Q5_1Kernel = Q8Act<DecodeQ5_1>::Kernel<NR>;
}  // namespace

void dot_rows_q5_0(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  dot_rows_dispatch<Q5_0Kernel>(n, w, act, act_stride, n_rows, out, out_stride);
}

void dot_rows_q5_1(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  dot_rows_dispatch<Q5_1Kernel>(n, w, act, act_stride, n_rows, out, out_stride);
}

void dot_outputs_q5_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
  if (n / kQK0 > kDecodeMaxBlocks) {
    const auto* wb = static_cast<const uint8_t*>(w);
    for (int64_t o = 0; o < n_w; ++o) dot_rows_q5_0(n, wb + o * row_bytes, act, 0, 1, out + o, 1);
    return;
  }
  dot_outputs_q5_0_impl(n, w, row_bytes, n_w, act, out);
}

void dot_tile_q5_0(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Q8Tile<DecodeQ5_0>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_q5_1(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  Q8Tile<DecodeQ5_1>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx2
