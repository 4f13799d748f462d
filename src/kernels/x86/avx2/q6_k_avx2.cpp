// AVX2 dot product of Q6_K weight rows with Q8_K activations (several rows at once). Codes are used
// unsigned (0..63) in maddubs and the −32 offset is taken off once per super-block as
// 32·Σ_g scales[g]·bsums[g], which gives the reference's integer sum exactly (§7.3).
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/quant/blocks.h"
#include "kernels/matmul/batch_rows.h"
#include "kernels/x86/avx2/k_tile_avx2.h"

namespace infer::kernels::avx2 {

namespace {
// The 32 6-bit codes of group g (0..3) in half h of a super-block, from that half's ql bytes (ql0, ql1)
// and qh bytes. Bits 2g+1..2g of each qh byte are moved to bits 5..4 by one 16-bit shift; what crosses
// into the neighbouring byte lands outside bits 5..4 and is masked off.
[[gnu::always_inline]] inline __m256i q6_codes(__m256i ql0, __m256i ql1, __m256i qh, int g) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2_at_4 = _mm256_set1_epi8(0x30);
  const __m256i ql = (g % 2) ? ql1 : ql0;
  const __m256i low4 = (g / 2) ? _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4) : _mm256_and_si256(ql, m4);
  const __m256i moved = g <= 2 ? _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - 2 * g))
                               : _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g - 4));
  return _mm256_or_si256(low4, _mm256_and_si256(moved, m2_at_4));
}

// int16 scales of group g: scale 8h+2g for elements 0..15 (low lane), 8h+2g+1 for 16..31 (high lane),
// picked from the half's scales broadcast to both lanes.
[[gnu::always_inline]] inline __m256i q6_group_scales(__m256i half_scales, int g) {
  const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>((4 * g + 2) | ((4 * g + 3) << 8))),
                                        _mm_set1_epi16(static_cast<short>((4 * g) | ((4 * g + 1) << 8))));
  return _mm256_shuffle_epi8(half_scales, pick);
}

template <int NR>
struct Q6_KKernel {
  static void run(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, float* out,
                  int64_t out_stride) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* y[NR];
    for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const BlockQ8_K*>(act + r * act_stride);
    __m128 acc = _mm_setzero_ps();  // lane r: row r
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const BlockQ6_K& b = x[i];
      _mm_prefetch(reinterpret_cast<const char*>(&b) + 2 * sizeof(BlockQ6_K), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(&b) + 2 * sizeof(BlockQ6_K) + 64, _MM_HINT_T0);
      __m256i sumi[NR];
      for (int r = 0; r < NR; ++r) sumi[r] = _mm256_setzero_si256();
      // int16 scales 8h..8h+7 in both 128-bit lanes, for half h.
      const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
      const __m256i half_scales[2] = {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(scales8)),
                                      _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(scales8, 8)))};
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load(b.ql + 64 * h), ql1 = load(b.ql + 64 * h + 32);
        const __m256i qh = load(b.qh + 32 * h);
        for (int g = 0; g < 4; ++g) {
          const __m256i code = q6_codes(ql0, ql1, qh, g);
          const __m256i scale = q6_group_scales(half_scales[h], g);
          for (int r = 0; r < NR; ++r) {
            const __m256i p = _mm256_maddubs_epi16(code, load(y[r][i].qs + 128 * h + 32 * g));
            sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, scale));
          }
        }
      }
      const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
      const float d = f16(b.d);
      for (int r = 0; r < NR; ++r) {
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load(y[r][i].bsums), scales16), 5);
        sumi[r] = _mm256_sub_epi32(sumi[r], offset);
      }
      acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(d), row_scales(y, i)), _mm_cvtepi32_ps(hsum_rows_i32(sumi)), acc);
    }
    store_rows<NR>(acc, out, out_stride);
  }
};

// One activation row against NW weight rows (decode): per weight row exactly the arithmetic above
// with NR = 1 (same super-block order and float operations; integer sums are exact), NW streams in flight.
constexpr int kPrefetchBlocks = 16;
// Two streams (dot_outputs_in_streams) and 16 blocks ahead decode fastest of those tried: more streams
// or a shorter reach leave memory idle (infer bench decode; docs/performance.md, Constants).
constexpr int kOutputsStreams = 2;

template <int NW>
struct Q6KOutputs {
static void run(int64_t n, const uint8_t* w, uint64_t stream_bytes, const uint8_t* act, float* out,
                int64_t out_stride) {
  const BlockQ6_K* x[NW];
  for (int o = 0; o < NW; ++o) x[o] = reinterpret_cast<const BlockQ6_K*>(w + o * stream_bytes);
  const auto* y = reinterpret_cast<const BlockQ8_K*>(act);
  __m128 acc = _mm_setzero_ps();  // lane o: weight row o
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const __m256i bsums = load(y[i].bsums);
    __m256i total[NW];
    static_assert(NW <= 2);
    uint16_t d_half[NW];
    for (int o = 0; o < NW; ++o) {
      const BlockQ6_K& b = x[o][i];
      // 16 super-blocks (~2-3 KiB) ahead of each stream: the best reach for decode (infer bench).
      // Every cache line of the block 16 ahead (a block is 210 bytes: up to 4 lines).
      for (int l = 0; l < 4; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(&b) + kPrefetchBlocks * sizeof(BlockQ6_K) + 64 * l, _MM_HINT_T0);
      }
      __m256i sumi = _mm256_setzero_si256();
      const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
      const __m256i half_scales[2] = {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(scales8)),
                                      _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(scales8, 8)))};
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load(b.ql + 64 * h), ql1 = load(b.ql + 64 * h + 32);
        const __m256i qh = load(b.qh + 32 * h);
        for (int g = 0; g < 4; ++g) {
          const __m256i code = q6_codes(ql0, ql1, qh, g);
          const __m256i scale = q6_group_scales(half_scales[h], g);
          const __m256i p = _mm256_maddubs_epi16(code, load(y[i].qs + 128 * h + 32 * g));
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale));
        }
      }
      const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16), 5);
      total[o] = _mm256_sub_epi32(sumi, offset);
      d_half[o] = b.d;
    }
    // 16-bit lane o: d of row o (built in registers, not stored and reloaded)
    const __m128i halves = _mm_setr_epi16(static_cast<short>(d_half[0]), static_cast<short>(NW > 1 ? d_half[1 % NW] : 0),
                                          0, 0, 0, 0, 0, 0);
    acc = _mm_fmadd_ps(_mm_mul_ps(_mm_cvtph_ps(halves), _mm_set1_ps(y[i].d)), _mm_cvtepi32_ps(hsum_rows_i32(total)), acc);
  }
  store_rows<NW>(acc, out, out_stride);
}
};
// The batch tile's view of the format (k_tile_avx2.h): sub-blocks of 16 codes, the −32 offset through
// the bsums.
struct Q6KTileFormat {
  using Block = BlockQ6_K;
  static constexpr int kTileMinRows = batch_rows::kAvx2KTileFrom;
  static constexpr DotRowsFn kRows = dot_rows_q6_k;
  static constexpr int kScaleVecs = 4;
  static constexpr bool kMins = false;
  static void codes(const Block& b, __m256i (&v)[8]) {
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load(b.ql + 64 * h), ql1 = load(b.ql + 64 * h + 32);
      const __m256i qh = load(b.qh + 32 * h);
      for (int g = 0; g < 4; ++g) v[4 * h + g] = q6_codes(ql0, ql1, qh, g);
    }
  }
  // The 8 rows' signed sub-block scales, lane by lane: scale j as (s, s), and bsums groups 2p, 2p + 1
  // as their own scales; from each row's 16 scale bytes transposed as 32-bit words, sign-extended.
  template <class Group>
  static void tile_scales(const Block* const (&x)[8], int64_t b, Group& g) {
    __m128i scale_bytes[8];
    for (int r = 0; r < 8; ++r) scale_bytes[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r][b].scales));
    __m256i words[4];
    transpose_words4x8(scale_bytes, words);
    __m256i sc[16];  // lane r: row r's scale j, sign-extended
    for (int j = 0; j < 16; ++j) sc[j] = _mm256_srai_epi32(_mm256_slli_epi32(words[j / 4], 24 - 8 * (j % 4)), 24);
    for (int j = 0; j < 16; ++j) g.scales[j] = int16_pairs(sc[j], sc[j]);
    for (int p = 0; p < 8; ++p) g.offsets[p] = int16_pairs(sc[2 * p], sc[2 * p + 1]);
    g.d = _mm256_cvtph_ps(_mm_setr_epi16(int16_t(x[0][b].d), int16_t(x[1][b].d), int16_t(x[2][b].d), int16_t(x[3][b].d),
                                         int16_t(x[4][b].d), int16_t(x[5][b].d), int16_t(x[6][b].d), int16_t(x[7][b].d)));
    g.dmin = _mm256_setzero_ps();
  }
};
}  // namespace

void dot_outputs_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
  dot_outputs_in_streams<kOutputsStreams, Q6KOutputs>(n, w, row_bytes, n_w, act, out);
}

void dot_rows_q6_k(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  dot_rows_dispatch<Q6_KKernel>(n, w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_q6_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  KTile<Q6KTileFormat>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx2
