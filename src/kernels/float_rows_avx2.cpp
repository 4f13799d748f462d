// AVX2/FMA/F16C dot products of F32, F16 and BF16 weight rows with activations of the same type.
// Four 8-lane accumulators per row over 32 elements at a time, then 8 at a time into the first, then a
// scalar tail; result = hsum((a0 + a1) + (a2 + a3)) + tail. At most 2 rows per call share the weight
// loads (more would spill registers); dot_rows splits 3 and 4 rows into calls of 2 and 1.
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
        float tail = 0;
        for (int64_t j = i; j < n; ++j) tail += L::one(x[j]) * L::one(y[r][j]);
        const __m256 s = _mm256_add_ps(_mm256_add_ps(a[0][r], a[1][r]), _mm256_add_ps(a[2][r], a[3][r]));
        out[r * out_stride] = hsum(s) + tail;
      }
    }
  };

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

}  // namespace infer::kernels::avx2
