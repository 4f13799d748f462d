// Helpers shared by the *_avx2.cpp kernels (compiled with -mavx2 -mfma -mf16c). Include only there.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/row_kernels.h"

namespace infer::kernels::avx2 {

// Fixed-order horizontal sum: (hi128 + lo128), then pairs, then the last two. Every kernel ends a
// row with this, so the order never depends on batching (invariant 7).
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float f16(uint16_t h) { return _cvtsh_ss(h); }  // exact, like f16_to_f32

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Calls Kernel<NR> for a run-time row count 1..kMaxRows. Each instantiation performs, for every row,
// exactly the arithmetic of Kernel<1>: rows only share the weight loads and unpacking.
template <template <int> class Kernel>
void dot_rows_dispatch(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows,
                       float* out, int64_t out_stride) {
  switch (n_rows) {
    case 1: return Kernel<1>::run(n, w, act, act_stride, out, out_stride);
    case 2: return Kernel<2>::run(n, w, act, act_stride, out, out_stride);
    case 3: return Kernel<3>::run(n, w, act, act_stride, out, out_stride);
    default: return Kernel<4>::run(n, w, act, act_stride, out, out_stride);
  }
}

// Decode (one activation row): dots n_w consecutive weight rows by running NW memory streams at once,
// one per equal part of the chunk (part k's row o is row k·part + o), which keeps more reads in flight
// than one stream. Outputs<NW>::run(n, w, stream_bytes, act, out, out_stride) dots the NW rows
// w + k·stream_bytes into out[k·out_stride]; each row's value is bitwise what Outputs<1> gives.
template <int NW, template <int> class Outputs>
void dot_outputs_in_streams(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                            float* out) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t part = n_w / NW;
  for (int64_t o = 0; o < part; ++o) {
    Outputs<NW>::run(n, wb + o * row_bytes, part * row_bytes, act, out + o, part);
  }
  for (int64_t o = NW * part; o < n_w; ++o) Outputs<1>::run(n, wb + o * row_bytes, 0, act, out + o, 0);
}

}  // namespace infer::kernels::avx2
