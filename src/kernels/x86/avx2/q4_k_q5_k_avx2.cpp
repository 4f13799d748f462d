// AVX2 dot products of Q4_K and Q5_K weight rows with Q8_K activations (several rows at once).
// Per super-block and row: integer Σ_j sc[j]·Σ code·y over the 8 sub-blocks (maddubs on the unsigned
// codes, then madd with the sub-block scale), the min term Σ_g bsums[g]·m[g/2] (madd), then
// acc += (d·dy)·hsum(sumi) and acc −= (dmin·dy)·hsum(summ) in one float per row (see hsum_rows_i32 in avx2_common.h).
#include <type_traits>

#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/quant/blocks.h"
#include "kernels/matmul/batch_rows.h"
#include "kernels/x86/avx2/k_tile_avx2.h"

namespace infer::kernels::avx2 {

namespace {
// 16 where qh's bit `bit` is set in a byte, else 0: the 5th bit of the codes of sub-block `bit`.
inline __m256i fifth_bit(__m256i qh, int bit) {
  // Move bit `bit` of every byte to bit 4 with a 16-bit shift: bits that cross into the neighbouring
  // byte land outside bit 4 (below it for left shifts, above it for right shifts) and are masked off.
  const __m256i moved = bit <= 4 ? _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - bit))
                                 : _mm256_srl_epi16(qh, _mm_cvtsi32_si128(bit - 4));
  return _mm256_and_si256(moved, _mm256_set1_epi8(16));
}
// The 6-bit scales and mins of a super-block (§5.1), unpacked with 32-bit word arithmetic.
struct KScaleVectors {
  __m256i scales;  // int16 sc[0..7], the same in both 128-bit lanes
  __m256i mins;    // int16 m[g / 2] for the 16 bsums groups g
};

// `s` points at the 12 scale bytes of a block; the 4 bytes after them (the block's codes) are read
// too and ignored. Works on the three 32-bit words w0..w2: sc[0..3] = w0 & 0x3F.., m[0..3] = w1 & 0x3F..,
// sc[4..7] = (w2 & 0x0F..) | top bits of w0, m[4..7] = (w2 >> 4 & 0x0F..) | top bits of w1.
inline KScaleVectors k_scale_vectors(const uint8_t* s) {
  const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i low6 = _mm_and_si128(w, _mm_set1_epi8(0x3F));                 // [sc03, m03, ..]
  const __m128i top2 = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w, 6), _mm_set1_epi8(0x03)), 4);
  const __m128i w2 = _mm_shuffle_epi32(w, _MM_SHUFFLE(2, 2, 2, 2));
  const __m128i low4 = _mm_and_si128(_mm_srlv_epi32(w2, _mm_setr_epi32(0, 4, 0, 0)), _mm_set1_epi8(0x0F));
  const __m128i high = _mm_or_si128(low4, top2);                               // [sc47, m47, ..]
  const __m128i bytes = _mm_unpacklo_epi32(low6, high);                        // sc0..7, m0..7
  const __m128i mins_pairs = _mm_shuffle_epi8(bytes, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
  return {_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes)), _mm256_cvtepu8_epi16(mins_pairs)};
}

// pshufb mask that broadcasts int16 lane j of each 128-bit half.
inline __m256i pick_scale(int j) {
  return _mm256_set1_epi16(static_cast<short>((2 * j) | ((2 * j + 1) << 8)));
}

template <bool kFiveBit>
struct KQuant {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;

  template <int NR>
  struct Kernel {
    static void run(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, float* out,
                    int64_t out_stride) {
      const auto* x = static_cast<const Block*>(w);
      const BlockQ8_K* y[NR];
      for (int r = 0; r < NR; ++r) y[r] = reinterpret_cast<const BlockQ8_K*>(act + r * act_stride);
      __m128 acc = _mm_setzero_ps();  // lane r: row r
      const __m256i m4 = _mm256_set1_epi8(0x0F);
      for (int64_t i = 0; i < n / kQKK; ++i) {
        const Block& b = x[i];
        _mm_prefetch(reinterpret_cast<const char*>(&b) + 2 * sizeof(Block), _MM_HINT_T0);
        const KScaleVectors sv = k_scale_vectors(b.scales);
        __m256i sumi[NR];
        for (int r = 0; r < NR; ++r) sumi[r] = _mm256_setzero_si256();
        __m256i qh;
        if constexpr (kFiveBit) qh = load(b.qh);
        for (int c = 0; c < 4; ++c) {
          const __m256i q = load(b.qs + 32 * c);
          __m256i lo = _mm256_and_si256(q, m4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
          if constexpr (kFiveBit) {
            lo = _mm256_or_si256(lo, fifth_bit(qh, 2 * c));
            hi = _mm256_or_si256(hi, fifth_bit(qh, 2 * c + 1));
          }
          const __m256i s_lo = _mm256_shuffle_epi8(sv.scales, pick_scale(2 * c));
          const __m256i s_hi = _mm256_shuffle_epi8(sv.scales, pick_scale(2 * c + 1));
          for (int r = 0; r < NR; ++r) {
            const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load(y[r][i].qs + 64 * c)), s_lo);
            const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load(y[r][i].qs + 64 * c + 32)), s_hi);
            sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(p_lo, p_hi));
          }
        }
        __m256i summ[NR];
        for (int r = 0; r < NR; ++r) summ[r] = _mm256_madd_epi16(load(y[r][i].bsums), sv.mins);
        const __m128 dyv = row_scales(y, i);
        const __m128 dd = _mm_mul_ps(_mm_set1_ps(f16(b.d)), dyv), dm = _mm_mul_ps(_mm_set1_ps(f16(b.dmin)), dyv);
        acc = _mm_fmadd_ps(dd, _mm_cvtepi32_ps(hsum_rows_i32(sumi)), acc);
        acc = _mm_fnmadd_ps(dm, _mm_cvtepi32_ps(hsum_rows_i32(summ)), acc);
      }
      store_rows<NR>(acc, out, out_stride);
    }
  };
};

// The batch tile's view of the format (k_tile_avx2.h): sub-blocks of 32 codes, the mins through the bsums.
template <bool kFiveBit>
struct KTileFormat {
  using Block = typename KQuant<kFiveBit>::Block;
  static constexpr int kTileMinRows = batch_rows::kAvx2KTileFrom;
  static constexpr DotRowsFn kRows = kFiveBit ? dot_rows_q5_k : dot_rows_q4_k;
  static constexpr int kScaleVecs = 8;
  static constexpr bool kMins = true;
  static void codes(const Block& b, __m256i (&v)[8]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kFiveBit) qh = load(b.qh);
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load(b.qs + 32 * c);
      v[2 * c] = _mm256_and_si256(q, m4);
      v[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFiveBit) {
        v[2 * c] = _mm256_or_si256(v[2 * c], fifth_bit(qh, 2 * c));
        v[2 * c + 1] = _mm256_or_si256(v[2 * c + 1], fifth_bit(qh, 2 * c + 1));
      }
    }
  }
  // unpack_k_scales for the 8 rows x[r], lane by lane: sub-block j's scale (s, s) and, for bsums groups
  // 2p and 2p + 1, the min m[p] twice; from each row's first 16 bytes (d, dmin, the 12 scale bytes)
  // transposed as 32-bit words.
  template <class Group>
  static void tile_scales(const Block* const (&x)[8], int64_t b, Group& g) {
    __m128i heads[8];
    for (int r = 0; r < 8; ++r) heads[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&x[r][b]));
    __m256i words[4];
    transpose_words4x8(heads, words);
    // lane r: row r's d and dmin (w0), its scale bytes 0-3 (w1), 4-7 (w2), 8-11 (w3)
    const __m256i w0 = words[0], w1 = words[1], w2 = words[2], w3 = words[3];
    const __m256i m6 = _mm256_set1_epi32(0x3F), m4 = _mm256_set1_epi32(0x0F);
    auto byte = [](__m256i w, int j) { return _mm256_and_si256(_mm256_srli_epi32(w, 8 * j), _mm256_set1_epi32(0xFF)); };
    auto pair = [](__m256i v) { return int16_pairs(v, v); };
    for (int j = 0; j < 4; ++j) {
      const __m256i s0 = byte(w1, j), s4 = byte(w2, j), s8 = byte(w3, j);
      g.scales[j] = pair(_mm256_and_si256(s0, m6));
      g.offsets[j] = pair(_mm256_and_si256(s4, m6));
      g.scales[j + 4] = pair(_mm256_or_si256(_mm256_and_si256(s8, m4), _mm256_slli_epi32(_mm256_srli_epi32(s0, 6), 4)));
      g.offsets[j + 4] = pair(_mm256_or_si256(_mm256_srli_epi32(s8, 4), _mm256_slli_epi32(_mm256_srli_epi32(s4, 6), 4)));
    }
    // the lanes' low and high halves as 8 f16 in order (packus keeps 16-bit values exactly)
    auto halves = [](__m256i v) {
      const __m256i packed = _mm256_packus_epi32(v, _mm256_setzero_si256());
      return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
    };
    g.d = _mm256_cvtph_ps(halves(_mm256_and_si256(w0, _mm256_set1_epi32(0xFFFF))));
    g.dmin = _mm256_cvtph_ps(halves(_mm256_srli_epi32(w0, 16)));
  }
};

template <int NR> using Q4_KKernel = KQuant<false>::Kernel<NR>;
template <int NR> using Q5_KKernel = KQuant<true>::Kernel<NR>;

// One activation row against NW weight rows (decode): per weight row exactly Kernel<1>'s arithmetic
// (same super-block order and float operations; the integer sums are exact), NW streams in flight.
constexpr int kPrefetchBlocks = 16;
// Two streams (dot_outputs_in_streams) and 16 blocks ahead decode fastest of those tried: more streams
// or a shorter reach leave memory idle (infer bench decode; docs/performance.md, Constants).
constexpr int kOutputsStreams = 2;

template <int NW>
struct Q4KOutputs {
static void run(int64_t n, const uint8_t* w, uint64_t stream_bytes, const uint8_t* act, float* out,
                int64_t out_stride) {
  const BlockQ4_K* x[NW];
  for (int o = 0; o < NW; ++o) x[o] = reinterpret_cast<const BlockQ4_K*>(w + o * stream_bytes);
  const auto* y = reinterpret_cast<const BlockQ8_K*>(act);
  __m128 acc = _mm_setzero_ps();  // lane o: weight row o
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const __m256i summ_y = load(y[i].bsums);
    __m256i sumi[NW], summ[NW];
    uint16_t d_half[NW], dmin_half[NW];
    for (int o = 0; o < NW; ++o) {
      const BlockQ4_K& b = x[o][i];
      // 16 super-blocks (~2-3 KiB) ahead of each stream: the best reach for decode (infer bench).
      // Every cache line of the block 16 ahead (a block is 144 bytes: up to 3 lines).
      for (int l = 0; l < 3; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(&b) + kPrefetchBlocks * sizeof(BlockQ4_K) + 64 * l, _MM_HINT_T0);
      }
      const KScaleVectors sv = k_scale_vectors(b.scales);
      sumi[o] = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        const __m256i q = load(b.qs + 32 * c);
        const __m256i lo = _mm256_and_si256(q, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i s_lo = _mm256_shuffle_epi8(sv.scales, pick_scale(2 * c));
        const __m256i s_hi = _mm256_shuffle_epi8(sv.scales, pick_scale(2 * c + 1));
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load(y[i].qs + 64 * c)), s_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load(y[i].qs + 64 * c + 32)), s_hi);
        sumi[o] = _mm256_add_epi32(sumi[o], _mm256_add_epi32(p_lo, p_hi));
      }
      summ[o] = _mm256_madd_epi16(summ_y, sv.mins);
      d_half[o] = b.d;
      dmin_half[o] = b.dmin;
    }
    // 16-bit lanes o: d of row o, 4 + o: its dmin (built in registers, not stored and reloaded)
    const auto lane = [](const uint16_t* v, int o) { return static_cast<short>(o < NW ? v[o % NW] : 0); };
    const __m128i halves = _mm_setr_epi16(lane(d_half, 0), lane(d_half, 1), 0, 0, lane(dmin_half, 0), lane(dmin_half, 1), 0, 0);
    // One reduction tree for both sums (NW ≤ 2): lanes [S0, S1, M0, M1].
    static_assert(NW <= 2);
    const __m256i z = _mm256_setzero_si256();
    const __m128i sums = hsum4_i32(sumi[0], NW > 1 ? sumi[NW - 1] : z, summ[0], NW > 1 ? summ[NW - 1] : z);
    const __m128 dy = _mm_set1_ps(y[i].d);
    const __m128 d = _mm_cvtph_ps(halves), dmin = _mm_cvtph_ps(_mm_unpackhi_epi64(halves, halves));  // exact
    acc = _mm_fmadd_ps(_mm_mul_ps(d, dy), _mm_cvtepi32_ps(sums), acc);
    acc = _mm_fnmadd_ps(_mm_mul_ps(dmin, dy), _mm_cvtepi32_ps(_mm_unpackhi_epi64(sums, sums)), acc);
  }
  store_rows<NW>(acc, out, out_stride);
}
};
}  // namespace

void dot_outputs_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act, float* out) {
  dot_outputs_in_streams<kOutputsStreams, Q4KOutputs>(n, w, row_bytes, n_w, act, out);
}

void dot_rows_q4_k(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  dot_rows_dispatch<Q4_KKernel>(n, w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_q4_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  KTile<KTileFormat<false>>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_tile_q5_k(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                   uint64_t act_stride, int n_rows, float* out, int64_t out_stride) {
  KTile<KTileFormat<true>>::dot_tile(n, w, row_bytes, n_w, act, act_stride, n_rows, out, out_stride);
}

void dot_rows_q5_k(int64_t n, const void* w, const uint8_t* act, uint64_t act_stride, int n_rows, float* out,
                   int64_t out_stride) {
  dot_rows_dispatch<Q5_KKernel>(n, w, act, act_stride, n_rows, out, out_stride);
}

}  // namespace infer::kernels::avx2
