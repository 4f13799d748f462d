// AVX2/FMA/F16C dot products of F32, F16 and BF16 weight rows with activations of the same type.
// Four 8-lane accumulators per (weight row, activation row) over 32 elements at a time, then 8 at a
// time into the first, then a scalar tail; result = hsum((a0 + a1) + (a2 + a3)) + tail. dot_rows
// shares the weight loads between at most 2 rows (more would spill registers); dot_tile, the batch
// kernel, gives each pair exactly that arithmetic but converts each activation block to f32 once for
// all the weight rows of an L2-sized sub-tile, and carries the accumulators across L1-sized k-blocks.
#include <algorithm>

#include "kernels/avx2_common.h"
#include "kernels/avx2_kernels.h"
#include "kernels/quant.h"

namespace infer::kernels::avx2 {

namespace {
struct LoadF32 {
  using T = float;
  static __m256 load8(const T* p) { return _mm256_loadu_ps(p); }
  static float one(T v) { return v; }
};
struct LoadF16 {
  using T = uint16_t;
  static __m256 load8(const T* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float one(T v) { return f16(v); }
};
struct LoadBF16 {
  using T = uint16_t;
  static __m256 load8(const T* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float one(T v) { return bf16_to_f32(v); }
};

// The scalar tail and the final sum of one pair, shared by every kernel shape (invariant 7).
template <class L>
inline float finish(const __m256 (&a)[4], const typename L::T* x, const typename L::T* y, int64_t from, int64_t n) {
  float tail = 0;
  for (int64_t j = from; j < n; ++j) tail += L::one(x[j]) * L::one(y[j]);
  return hsum(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]))) + tail;
}

// Batch tiles: kTileRows activation rows per pass over a weight row (12 accumulators of the 16
// registers); k-blocks of kBlockElements keep those rows' f32 copies in L1, and a sub-tile of at most
// kSubTileBytes (and kSubTileRows rows) keeps the weight rows re-read by every row group in L2
// (infer bench pp512 on F16/BF16; figures in docs/performance.md, "Prefill").
constexpr int kTileRows = 3;
constexpr int64_t kBlockElements = 1024;  // a multiple of 32: blocks end where a 32-element step would
constexpr uint64_t kSubTileBytes = 128 * 1024;
constexpr int64_t kSubTileRows = 64;

template <class L>
struct FloatRows {
  template <int NR>
  struct Kernel {
    static void run(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, float* out,
                    int64_t out_stride) {
      using T = typename L::T;
      const T* x = static_cast<const T*>(w);
      const T* y[NR];
      for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const T*>(act + r * act_stride);
      __m256 a[4][NR];
      for (auto& row : a) {
        for (int r = 0; r < NR; ++r) row[r] = _mm256_setzero_ps();
      }
      int64_t i = 0;
      for (; i + 32 <= n; i += 32) {
        for (int k = 0; k < 4; ++k) {
          const __m256 wv = L::load8(x + i + 8 * k);
          for (int r = 0; r < NR; ++r) a[k][r] = _mm256_fmadd_ps(wv, L::load8(y[r] + i + 8 * k), a[k][r]);
        }
      }
      for (; i + 8 <= n; i += 8) {
        const __m256 wv = L::load8(x + i);
        for (int r = 0; r < NR; ++r) a[0][r] = _mm256_fmadd_ps(wv, L::load8(y[r] + i), a[0][r]);
      }
      for (int r = 0; r < NR; ++r) {
        const __m256 pair[4] = {a[0][r], a[1][r], a[2][r], a[3][r]};
        out[r * out_stride] = finish<L>(pair, x, y[r], i, n);
      }
    }
  };

  // Accumulators of NR rows against one weight row, over elements [k0, k1) of x and of the rows'
  // f32 copies y[r] (which start at element k0); the 8-element steps only in the last block.
  template <int NR>
  static void tile_block(const typename L::T* x, const float* const (&y)[NR], int64_t k0, int64_t k1, bool last,
                         __m256 (&a)[4][NR]) {
    __m256 acc[4][NR];
    for (int k = 0; k < 4; ++k) {
      for (int r = 0; r < NR; ++r) acc[k][r] = a[k][r];
    }
    int64_t i = k0;
    for (; i + 32 <= k1; i += 32) {
      for (int k = 0; k < 4; ++k) {
        const __m256 wv = L::load8(x + i + 8 * k);
        for (int r = 0; r < NR; ++r) acc[k][r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(y[r] + (i - k0) + 8 * k), acc[k][r]);
      }
    }
    for (; last && i + 8 <= k1; i += 8) {
      const __m256 wv = L::load8(x + i);
      for (int r = 0; r < NR; ++r) acc[0][r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(y[r] + (i - k0)), acc[0][r]);
    }
    for (int k = 0; k < 4; ++k) {
      for (int r = 0; r < NR; ++r) a[k][r] = acc[k][r];
    }
  }

  // Weight rows [0, n_w) of a sub-tile against activation rows [0, NR): the pairs' accumulators live
  // in `state` between k-blocks (storing and reloading a register is exact).
  template <int NR>
  static void tile_rows(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, float* out, int64_t out_stride) {
    using T = typename L::T;
    alignas(32) float copy[NR][kBlockElements];
    __m256 state[kSubTileRows][4][NR];
    for (int64_t o = 0; o < n_w; ++o) {
      for (int k = 0; k < 4; ++k) {
        for (int r = 0; r < NR; ++r) state[o][k][r] = _mm256_setzero_ps();
      }
    }
    const T* rows[NR];
    for (int r = 0; r < NR; ++r) rows[r] = reinterpret_cast<const T*>(act + r * act_stride);
    const float* y[NR];
    for (int r = 0; r < NR; ++r) y[r] = copy[r];
    const int64_t steps_end = n / 8 * 8;  // the 8-element steps end here; the scalar tail follows
    for (int64_t k0 = 0; k0 < n; k0 += kBlockElements) {
      const int64_t k1 = std::min(n, k0 + kBlockElements);
      for (int r = 0; r < NR; ++r) {
        for (int64_t i = k0; i + 8 <= std::min(k1, steps_end); i += 8) {
          _mm256_store_ps(copy[r] + (i - k0), L::load8(rows[r] + i));
        }
      }
      for (int64_t o = 0; o < n_w; ++o) {
        tile_block<NR>(reinterpret_cast<const T*>(w + o * row_bytes), y, k0, k1, k1 == n, state[o]);
      }
    }
    for (int64_t o = 0; o < n_w; ++o) {
      const T* x = reinterpret_cast<const T*>(w + o * row_bytes);
      for (int r = 0; r < NR; ++r) {
        const __m256 pair[4] = {state[o][0][r], state[o][1][r], state[o][2][r], state[o][3][r]};
        out[r * out_stride + o] = finish<L>(pair, x, rows[r], steps_end, n);
      }
    }
  }

  static void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
    dot_sub_tiles<kTileRows, FloatRows>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride,
                                        kSubTileBytes, kSubTileRows);
  }

  static void dot_rows(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                       int64_t out_stride) {
    for (int r = 0; r < n_rows; r += 2) {
      const uint8_t* a = act + r * act_stride;
      if (n_rows - r >= 2) {
        Kernel<2>::run(n, w, a, act_stride, out + r * out_stride, out_stride);
      } else {
        Kernel<1>::run(n, w, a, act_stride, out + r * out_stride, out_stride);
      }
    }
  }
};
}  // namespace

void dot_rows_f32(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                  int64_t out_stride) {
  FloatRows<LoadF32>::dot_rows(n, w, act, act_stride, n_rows, out, out_stride);
}
void dot_rows_f16(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                  int64_t out_stride) {
  FloatRows<LoadF16>::dot_rows(n, w, act, act_stride, n_rows, out, out_stride);
}
void dot_rows_bf16(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  FloatRows<LoadBF16>::dot_rows(n, w, act, act_stride, n_rows, out, out_stride);
}

#define INFER_FLOAT_TILE(name, L)                                                                          \
  void name(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, uint64_t act_stride, \
            int n_rows, float* out, int64_t out_stride) {                                                     \
    FloatRows<L>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);                    \
  }
INFER_FLOAT_TILE(dot_tile_f32, LoadF32)
INFER_FLOAT_TILE(dot_tile_f16, LoadF16)
INFER_FLOAT_TILE(dot_tile_bf16, LoadBF16)
#undef INFER_FLOAT_TILE

}  // namespace infer::kernels::avx2
