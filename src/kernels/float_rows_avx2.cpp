// AVX2/FMA/F16C dot products of F32, F16 and BF16 weight rows with their activations, which the
// quantisers below round to F16/BF16 as the references do but store as f32: converted once per
// matmul instead of once per group of weight rows. Every (weight row, activation row) pair has one
// arithmetic whichever kernel computes it (invariant 7): one 8-lane accumulator over the 8-element
// steps in order, acc = fma(w, y, acc), then hsum(acc) plus the scalar tail. One chain per pair lets
// the batch tile keep kTileWeights x kTileRows pairs in registers; decode gets its parallel chains
// from several weight rows at once.
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

// Batch tiles: kTileWeights weight rows x kTileRows activation rows per pass over the whole row (12
// accumulators, the activation vectors and one weight vector fill the 16 registers; blocks of the row
// kept in L1, the accumulators stored between them, ran slower: BM_MatmulPrefill F16). A sub-tile of
// at most kSubTileBytes (and kSubTileRows rows) keeps the weight rows re-read by every row group in L2.
constexpr int kTileWeights = 4;
constexpr int kTileRows = 3;
constexpr uint64_t kSubTileBytes = 128 * 1024;
constexpr int64_t kSubTileRows = 64;
constexpr int kDecodeStreams = 4;  // weight rows a decode pass dots at once: 4 independent chains

template <class L>
struct FloatRows {
  using T = typename L::T;

  // The scalar tail and the final sum of one pair, shared by every kernel shape (invariant 7).
  static float finish(__m256 acc, const T* x, const float* y, int64_t from, int64_t n) {
    float tail = 0;
    for (int64_t j = from; j < n; ++j) tail += L::one(x[j]) * y[j];
    return hsum(acc) + tail;
  }

  // acc[o][r] += x[o] · y[r] over the 8-element steps of [k0, k1); y[r] holds element k0 at y[r][0].
  template <int NW, int NR>
  static void steps(const T* const (&x)[NW], const float* const (&y)[NR], int64_t k0, int64_t k1,
                    __m256 (&acc)[NW][NR]) {
    for (int64_t i = k0; i + 8 <= k1; i += 8) {
      __m256 yv[NR];
      for (int r = 0; r < NR; ++r) yv[r] = _mm256_loadu_ps(y[r] + (i - k0));
      for (int o = 0; o < NW; ++o) {
        const __m256 wv = L::load8(x[o] + i);
        for (int r = 0; r < NR; ++r) acc[o][r] = _mm256_fmadd_ps(wv, yv[r], acc[o][r]);
      }
    }
  }

  // NW weight rows x NR activation rows in one pass over the row; out[o][r * out_stride].
  template <int NW, int NR>
  static void pass(int64_t n, const T* const (&x)[NW], const float* const (&y)[NR], float* const (&out)[NW],
                   int64_t out_stride) {
    __m256 acc[NW][NR];
    for (auto& row : acc) {
      for (auto& a : row) a = _mm256_setzero_ps();
    }
    const int64_t steps_end = n / 8 * 8;
    steps(x, y, 0, steps_end, acc);
    if constexpr (NW == 4) {
      if (steps_end == n) {  // no tails: four pairs' sums at once, each still hsum(acc) + 0.0f
        for (int r = 0; r < NR; ++r) {
          alignas(16) float s[4];
          _mm_store_ps(s, _mm_add_ps(hsum4(acc[0][r], acc[1][r], acc[2][r], acc[3][r]), _mm_setzero_ps()));
          for (int o = 0; o < NW; ++o) out[o][r * out_stride] = s[o];
        }
        return;
      }
    }
    for (int o = 0; o < NW; ++o) {
      for (int r = 0; r < NR; ++r) out[o][r * out_stride] = finish(acc[o][r], x[o], y[r], steps_end, n);
    }
  }

  template <int NW>
  struct Outputs {
    static void run(int64_t n, const void* w, uint64_t stream_bytes, const uint8_t* act, float* out,
                    int64_t out_stride) {
      const T* x[NW];
      float* o[NW];
      for (int k = 0; k < NW; ++k) {
        x[k] = reinterpret_cast<const T*>(static_cast<const uint8_t*>(w) + k * stream_bytes);
        o[k] = out + k * out_stride;
      }
      const float* const y[1] = {reinterpret_cast<const float*>(act)};
      pass<NW, 1>(n, x, y, o, 0);
    }
  };

  // Weight rows [0, n_w) of a sub-tile against activation rows [0, NR), kTileWeights rows a pass.
  template <int NR>
  static void tile_rows(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                        uint64_t act_stride, float* out, int64_t out_stride) {
    const float* y[NR];
    for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const float*>(act + r * act_stride);
    int64_t o = 0;
    for (; o + kTileWeights <= n_w; o += kTileWeights) {
      weights_pass<kTileWeights, NR>(n, w, row_bytes, o, y, out, out_stride);
    }
    if (o < n_w) partial_pass<kTileWeights - 1, NR>(static_cast<int>(n_w - o), n, w, row_bytes, o, y, out, out_stride);
  }

  // Weight rows [o, o + NW) of a sub-tile. Inlined: out of line the F16 tile ran slower (BM_MatmulPrefill).
  template <int NW, int NR>
  [[gnu::always_inline]] static void weights_pass(int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t o,
                                                  const float* const (&y)[NR], float* out, int64_t out_stride) {
    const T* x[NW];
    float* dst[NW];
    for (int j = 0; j < NW; ++j) {
      x[j] = reinterpret_cast<const T*>(w + (o + j) * row_bytes);
      dst[j] = out + o + j;
    }
    pass<NW, NR>(n, x, y, dst, out_stride);
  }

  // The last 1..NW weight rows of a sub-tile (fewer than kTileWeights).
  template <int NW, int NR>
  static void partial_pass(int n_w, int64_t n, const uint8_t* w, uint64_t row_bytes, int64_t o,
                           const float* const (&y)[NR], float* out, int64_t out_stride) {
    if constexpr (NW > 1) {
      if (n_w < NW) return partial_pass<NW - 1, NR>(n_w, n, w, row_bytes, o, y, out, out_stride);
    }
    weights_pass<NW, NR>(n, w, row_bytes, o, y, out, out_stride);
  }

  static void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
    dot_sub_tiles<kTileRows, FloatRows>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride,
                                        kSubTileBytes, kSubTileRows);
  }

  static void dot_outputs(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                          float* out) {
    dot_outputs_in_streams<kDecodeStreams, Outputs>(n, w, row_bytes, n_w, act, out);
  }

  static void dot_rows(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                       int64_t out_stride) {
    const T* const x[1] = {static_cast<const T*>(w)};
    for (int r = 0; r < n_rows; r += 2) {
      const auto* a = reinterpret_cast<const float*>(act + r * act_stride);
      float* const o[1] = {out + r * out_stride};
      if (n_rows - r >= 2) {
        const float* const y[2] = {a, reinterpret_cast<const float*>(act + (r + 1) * act_stride)};
        pass<1, 2>(n, x, y, o, out_stride);
      } else {
        const float* const y[1] = {a};
        pass<1, 1>(n, x, y, o, out_stride);
      }
    }
  }
};
}  // namespace

#define INFER_FLOAT_KERNELS(suffix, L)                                                                           \
  void dot_rows_##suffix(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows,          \
                         float* out, int64_t out_stride) {                                                       \
    FloatRows<L>::dot_rows(n, w, act, act_stride, n_rows, out, out_stride);                                      \
  }                                                                                                              \
  void dot_outputs_##suffix(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,       \
                            float* out) {                                                                        \
    FloatRows<L>::dot_outputs(n, w, row_bytes, n_w, act, out);                                                   \
  }                                                                                                              \
  void dot_tile_##suffix(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,          \
                         uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {                      \
    FloatRows<L>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);                      \
  }
INFER_FLOAT_KERNELS(f32, LoadF32)
INFER_FLOAT_KERNELS(f16, LoadF16)
INFER_FLOAT_KERNELS(bf16, LoadBF16)
#undef INFER_FLOAT_KERNELS

void quantize_act_f16_as_f32(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
  }
  for (; i < n; ++i) y[i] = f16_to_f32(f32_to_f16(src[i]));
}

void quantize_act_bf16_as_f32(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<float*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(f32_to_bf16(src[i]));
}

}  // namespace infer::kernels::avx2
