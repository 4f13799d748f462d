// The AVX-512 VNNI batch tile of the K-quants over the interleaved layout (Q4_K and Q5_K:
// q4_k_q5_k_avx512.cpp; Q6_K: q6_k_avx512.cpp), for CPUs without AMX tiles (and Q5_K, which has none).
// Each group of 16 weight rows is unpacked once per call into scratch: per super-block its 256 codes
// as bytes (vector v: codes 4v..4v+3 of the 16 rows, one row per 32-bit lane), its sub-block scales as
// scale_words(), the int16 pairs that multiply the activation bsums, and its float scales. Passes of
// kRowsPerPass activation rows then read them back, where the interleaved rows kernel
// (dot_rows_interleaved) unpacks the codes and decodes the scales again for every pass; the first pass
// also fetches the next group's raw units into L2, so that unpacking them does not wait on memory.
// The integer sums are exact and the float step per super-block is the rows kernel's, so every value
// is bitwise what that kernel gives (invariant 7). Include only in *_avx512.cpp files, after the
// format's own header (avx512_q4_k.h or avx512_q6_k.h); internal linkage, as avx512_common.h explains.
#pragma once
#include "kernels/x86/avx512/avx512_common.h"

namespace infer::kernels::avx512 {
namespace {

// One super-block of a group. Subs: the format's sub-blocks per super-block.
template <int Subs>
struct alignas(64) KUnpackedUnit {
  static constexpr int kSubs = Subs;
  static constexpr int kVecsPerSub = 64 / Subs;
  Zmm codes[64];             // vector v: the unsigned codes 4v..4v+3 of rows 0..15
  Zmm scale_words[Subs];     // sub-block j: scale_words() of the rows' scales
  Zmm pairs[Subs / 2];       // pair p: the int16 pairs that multiply the activation bsum pair p
  ZmmF d, dmin;              // the rows' super-block scales (dmin: Q4_K, Q5_K)
};

// A Format gives: Unit (a KUnpackedUnit), kSumGroupLen and kBlockBytes as its interleaved rows
// kernel's Decode; unpack(src, i, unit): super-block i of the group;
// add_unit(unit, s, sums, row, i, dy, acc): the rows kernel's float step with the exact integer sums s
// of activation row `row`.
//
// The group's units against activation rows row0..row0 + NR − 1. next_group: the raw units of the group
// to unpack next, fetched into L2 meanwhile (the first pass only), or nullptr.
template <class Format, int NR>
void unpacked_pass(const typename Format::Unit* units, const ActivationSums& sums, const uint8_t* act,
                   uint64_t act_stride, int row0, float* out, int64_t out_stride, const uint8_t* next_group) {
  using Unit = typename Format::Unit;
  const BlockQ8_K* y[NR];
  __m512 acc[NR];
  for (int a = 0; a < NR; ++a) {
    y[a] = reinterpret_cast<const BlockQ8_K*>(act + (row0 + a) * act_stride);
    acc[a] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < sums.n_blocks; ++i) {
    if (next_group) {  // the next group's unit i into L2, at the pace of this group's arithmetic
      const auto* p = reinterpret_cast<const char*>(next_group + i * kGroupRows * Format::kBlockBytes);
      for (int64_t l = 0; l < kGroupRows * Format::kBlockBytes; l += 64) _mm_prefetch(p + l, _MM_HINT_T1);
    }
    const Unit& u = units[i];
    __m512i s[NR];
    for (int a = 0; a < NR; ++a) s[a] = _mm512_setzero_si512();
    for (int j = 0; j < Unit::kSubs; ++j) {
      __m512i sum[NR];
      for (int a = 0; a < NR; ++a) sum[a] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int t = 0; t < Unit::kVecsPerSub; ++t) {
        const int v = j * Unit::kVecsPerSub + t;
        const __m512i code = u.codes[v].v;
        for (int a = 0; a < NR; ++a) sum[a] = _mm512_dpbusd_epi32(sum[a], code, broadcast_word(y[a][i].qs + 4 * v));
      }
      for (int a = 0; a < NR; ++a) s[a] = add_scaled(s[a], sum[a], u.scale_words[j].v);
    }
    for (int a = 0; a < NR; ++a) acc[a] = Format::add_unit(u, s[a], sums, row0 + a, i, y[a][i].d, acc[a]);
  }
  for (int a = 0; a < NR; ++a) _mm512_storeu_ps(out + (row0 + a) * out_stride, acc[a]);
}

// Contract as DotTileFn (n_w a multiple of 16).
template <class Format>
void dot_tile_unpacked(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                       uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  using Unit = typename Format::Unit;
  thread_local ActivationSums sums;
  thread_local Buffer<Unit> units;
  sums.build(act, act_stride, n_rows, n, Format::kSumGroupLen);
  units.resize(static_cast<size_t>(sums.n_blocks));
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int64_t o0 = 0; o0 < n_w; o0 += kGroupRows) {
    const InterleavedRows src(wb + o0 * row_bytes, row_bytes, kGroupRows, Format::kBlockBytes);
    for (int64_t i = 0; i < sums.n_blocks; ++i) Format::unpack(src, i, units[i]);
    const Unit* u = units.data();
    float* o = out + o0;
    const uint8_t* next = o0 + kGroupRows < n_w ? wb + (o0 + kGroupRows) * row_bytes : nullptr;
    for (int a0 = 0; a0 < n_rows; a0 += kRowsPerPass) {
      const uint8_t* fetch = a0 == 0 ? next : nullptr;
      switch (static_cast<int>(min_of(kRowsPerPass, n_rows - a0))) {
        case 1: unpacked_pass<Format, 1>(u, sums, act, act_stride, a0, o, out_stride, fetch); break;
        case 2: unpacked_pass<Format, 2>(u, sums, act, act_stride, a0, o, out_stride, fetch); break;
        case 3: unpacked_pass<Format, 3>(u, sums, act, act_stride, a0, o, out_stride, fetch); break;
        case 4: unpacked_pass<Format, 4>(u, sums, act, act_stride, a0, o, out_stride, fetch); break;
        case 5: unpacked_pass<Format, 5>(u, sums, act, act_stride, a0, o, out_stride, fetch); break;
        case 6: unpacked_pass<Format, 6>(u, sums, act, act_stride, a0, o, out_stride, fetch); break;
        case 7: unpacked_pass<Format, 7>(u, sums, act, act_stride, a0, o, out_stride, fetch); break;
        default: unpacked_pass<Format, 8>(u, sums, act, act_stride, a0, o, out_stride, fetch); break;
      }
    }
  }
}

}  // namespace
}  // namespace infer::kernels::avx512
