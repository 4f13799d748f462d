// AVX2/FMA/F16C dot products of F32, F16 and BF16 weight rows with their activations, which the
// quantisers below round to F16/BF16 as the references do but store as f32: converted once per
// matmul instead of once per group of weight rows. Every kernel shape takes float_rows_tile.h's pass
// (invariant 7): the batch tile 4 weight rows x 3 activation rows at a time (12 accumulators, the
// activation vectors and one weight vector fill the 16 registers); decode gets its parallel chains
// from several weight rows at once.
#include <algorithm>

#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/float_rows_tile.h"
#include "kernels/quant/quant.h"

namespace infer::kernels::avx2 {

namespace {
using float_rows::LoadBF16;
using float_rows::LoadF16;
using float_rows::LoadF32;

// A sub-tile of at most kSubTileBytes (and kSubTileRows rows) keeps the weight rows re-read by every
// row group in L2.
constexpr int kTileRows = 3;
constexpr uint64_t kSubTileBytes = 128 * 1024;
constexpr int64_t kSubTileRows = 64;
constexpr int kDecodeStreams = 4;  // weight rows a decode pass dots at once: 4 independent chains

template <class L>
struct FloatRows {
  using Tile = float_rows::Tile<L, kTileRows>;
  using T = typename L::T;

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
      Tile::template pass<NW, 1>(n, x, y, o, 0);
    }
  };

  static void dot_tile(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
    dot_sub_tiles<kTileRows, Tile>(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride, kSubTileBytes,
                                   kSubTileRows);
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
        Tile::template pass<1, 2>(n, x, y, o, out_stride);
      } else {
        const float* const y[1] = {a};
        Tile::template pass<1, 1>(n, x, y, o, out_stride);
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

namespace {
// bf16_to_f32(f32_to_bf16(x)) 8 lanes at a time: round to nearest even by the bias 0x7FFF plus the
// kept bits' last one, NaNs quieted as f32_to_bf16 does.
__m256 round_to_bf16(__m256 x) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m256i u = _mm256_castps_si256(x);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                         _mm256_set1_epi32(0x7F800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd), high);
  const __m256i quiet = _mm256_or_si256(_mm256_and_si256(u, high), _mm256_set1_epi32(0x00400000));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(rounded, quiet, nan));
}
}  // namespace

static_assert(LoadBF16::kStep == kBf16ActStep);

void quantize_act_bf16_as_f32(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + LoadBF16::kStep <= n; i += LoadBF16::kStep) {
    const __m256 step[2] = {round_to_bf16(_mm256_loadu_ps(src + i)), round_to_bf16(_mm256_loadu_ps(src + i + 8))};
    float_rows::bf16_pair_order(step, y + i);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, round_to_bf16(_mm256_loadu_ps(src + i)));
  for (; i < n; ++i) y[i] = bf16_to_f32(f32_to_bf16(src[i]));
}

}  // namespace infer::kernels::avx2
