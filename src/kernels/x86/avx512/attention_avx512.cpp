// AVX-512 attention of one query row, for head_dim 64, 128 or 256: the AVX2 version's steps and key
// order, 16 lanes wide, with each head's output held in registers while the values stream past (the
// AVX2 version reloads and stores it for every key). attention_row() takes it for every row on
// AVX-512 machines (use_avx512()), and attention_rows() a block kernel that gives each row the same
// bits, so a row's arithmetic never depends on its batch (invariant 7). Q8_0 and Q4_0 keys (heads of
// whole blocks, in lanes) are scored by integer dots (q8_0_scores.h); quantised values are read as
// codes, their block's scale taken into the probabilities (BlockRows).
// Like the *_avx512.cpp and *_amx.cpp kernel files, this file defines no weak symbols (no
// standard-library templates): see avx512_common.h.
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* operands): a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/ops/attention_queries.h"
#include "kernels/ops/key_rows.h"
#include "kernels/ops/q8_0_scores.h"
#include "kernels/x86/avx512/ops_avx512.h"
#include "kernels/x86/f16_lanes.h"

namespace infer::kernels {

namespace {
inline int min_int(int a, int b) { return a < b ? a : b; }

inline __m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// How the kernels read 16 elements d..d+15 of a row of the head's slice in f32 (d a multiple of 16;
// the head starts a block: head widths 64, 128, 256), and the 2-byte units a slice of n elements spans.
// The values passes read value rows through codes16 and, for quantised rows (kScaledCodes), take
// each block's scale into the probabilities: p · (code · d) as (p · d) · code, one multiply a block
// and head instead of one a chunk (BM_AttentionStepQwen3Shape).
struct F16Rows {
  static constexpr bool kIntegerScores = false, kScaledCodes = false;
  __m512 load16(const uint16_t* row, int d) const { return load_f16x16(row + d); }
  __m512 codes16(const uint16_t* row, int d) const { return load16(row, d); }
  int slice_halves(int n) const { return n; }
};

template <KvType T>
struct BlockRows {
  static constexpr int kBlockHalves = int(kv_block_halves(T));
  static constexpr KvType kType = T;
  static constexpr bool kIntegerScores = true;  // keys in lanes: q8_0_scores.h
  static constexpr bool kScaledCodes = true;
  // The codes of elements d..d+15, unscaled.
  __m512 codes16(const uint16_t* row, int d) const {
    const auto* codes = reinterpret_cast<const uint8_t*>(row + (d / kKvBlockElements) * kBlockHalves + 1);
    if constexpr (T == KvType::Q8_0) {
      return _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + d % kKvBlockElements))));
    } else {  // byte j: element j in its low nibble, j + 16 in its high one
      // The block's 16 bytes widened once for both its chunks (the same load, so the two calls of a
      // values pass share it), each nibble then looked up as code − 8 in f32: the same values in four
      // instructions fewer a chunk (BM_AttentionStepQwen3Shape, Q4_0).
      const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
      const __m512i nibbles = d % kKvBlockElements != 0 ? _mm512_srli_epi32(bytes, 4)
                                                         : _mm512_and_si512(bytes, _mm512_set1_epi32(0x0F));
      return _mm512_permutexvar_ps(nibbles, _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7));
    }
  }
  // The scale of the block holding element d, in every lane.
  __m512 scale16(const uint16_t* row, int d) const {
    return _mm512_set1_ps(_cvtsh_ss(row[(d / kKvBlockElements) * kBlockHalves]));
  }
  __m512 load16(const uint16_t* row, int d) const { return _mm512_mul_ps(codes16(row, d), scale16(row, d)); }
  // The scales of a slice's first NB (≤ 8) blocks as f32, lane b block b's.
  template <int NB>
  __m256 scales8(const uint16_t* row) const {
    return _mm256_cvtph_ps(f16_lanes8([&](int b) { return b < NB ? row[b * kBlockHalves] : uint16_t{0}; }));
  }
  int slice_halves(int n) const { return n / kKvBlockElements * kBlockHalves; }
};

// How far ahead the passes prefetch (keys). A head's rows are a slice of rows kv_dim apart, which the
// hardware prefetchers do not follow. Far ahead into L2, whose miss buffers keep many more lines in
// flight than L1's, then the next few rows into L1 (BM_AttentionStepQwen3Shape; docs/performance.md,
// Constants).
constexpr int kKeysAhead = 64, kValuesAhead = 32, kValuesAheadL1 = 8;

inline void prefetch_row_l2(const uint16_t* row, int halves) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int b = 0; b < halves * 2; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
}
inline void prefetch_row(const uint16_t* row, int halves) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int b = 0; b < halves * 2; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}

// The 16 sums of a[0..15] (lane i: Σ of a[i]'s lanes) by one fixed add tree: every key's dot goes
// through the same operations, whatever its place among the 16.
inline __m512 sum16(const __m512 (&a)[16]) {
  __m512 t[8], u[4];
  for (int i = 0; i < 8; ++i) {
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44), _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xEE));
  }
  // u[i]: keys 4i..4i+3 in each 128-bit lane, summed over that lane's quarter of the elements.
  const __m512 v0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
  const __m512 v1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, 0x88), _mm512_shuffle_f32x4(v0, v1, 0xDD));
}

// The rows of keys j0..j0 + W − 1 (past the last key, the last key again), and prefetches of the W
// keys kKeysAhead further on (to L2) and of the next W (to L1). Returns how many of the W are real keys.
template <int W>
int key_block(const uint16_t* k_base, const PagedKv& kv, int n_keys, int j0, int row_len, const uint16_t** rows) {
  // row_len: 2-byte units of a row's slice
  const int m = min_int(W, n_keys - j0);
  for (int i = 0; i < W; ++i) rows[i] = key_row(k_base, kv, j0 + min_int(i, m - 1));
  for (int j = j0 + kKeysAhead; j < min_int(j0 + kKeysAhead + W, n_keys); ++j) {
    prefetch_row_l2(key_row(k_base, kv, j), row_len);
  }
  for (int j = j0 + W; j < min_int(j0 + 2 * W, n_keys); ++j) prefetch_row(key_row(k_base, kv, j), row_len);
  return m;
}

// scores[h * n_keys + j] = (q_h · k_j) · scale for the n_gqa heads of one group, 16 keys at a time;
// the last group repeats its final key to fill the vector and keeps only the real lanes.
template <int NC, class Rows>  // head_dim = 16 · NC
void scores_by_16(const float* qg, const Rows& fmt, const uint16_t* k_base, const PagedKv& kv, int n_keys, int h_begin,
                  int n_gqa, float scale, float* scores) {
  const __m512 sv = _mm512_set1_ps(scale);
  const int halves = fmt.slice_halves(16 * NC);
  for (int j = 0; j < min_int(kKeysAhead, n_keys); ++j) prefetch_row_l2(key_row(k_base, kv, j), halves);
  for (int j0 = 0; j0 < n_keys; j0 += 16) {
    const uint16_t* rows[16];
    const int m = key_block<16>(k_base, kv, n_keys, j0, halves, rows);
    const auto mask = static_cast<__mmask16>((1u << m) - 1);
    for (int h = h_begin; h < n_gqa; ++h) {
      const float* q = qg + h * 16 * NC;
      __m512 a[16];
      for (auto& x : a) x = _mm512_setzero_ps();
      for (int c = 0; c < NC; ++c) {
        const __m512 qv = _mm512_loadu_ps(q + 16 * c);
        for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(qv, fmt.load16(rows[i], 16 * c), a[i]);
      }
      _mm512_mask_storeu_ps(scores + static_cast<int64_t>(h) * n_keys + j0, mask, _mm512_mul_ps(sum16(a), sv));
    }
  }
}

// The same scores for heads h0 and h0 + 1, 8 keys at a time: each key's chunk is converted once for
// both heads (the conversion is two µops), sum16's lanes 0-7 are head h0's keys and 8-15 head
// h0 + 1's. Every (head, key) dot takes the same steps as in scores_by_16 (its chunks in order into
// its own accumulator, then the same tree), so the scores are bitwise the same.
template <int NC, class Rows>
void scores_pair_by_8(const float* qg, const Rows& fmt, const uint16_t* k_base, const PagedKv& kv, int n_keys, int h0,
                      float scale, float* scores) {
  const __m512 sv = _mm512_set1_ps(scale);
  const int halves = fmt.slice_halves(16 * NC);
  const float* q0 = qg + h0 * 16 * NC;
  const float* q1 = q0 + 16 * NC;
  float* s0 = scores + static_cast<int64_t>(h0) * n_keys;
  float* s1 = s0 + n_keys;
  for (int j = 0; j < min_int(kKeysAhead, n_keys); ++j) prefetch_row_l2(key_row(k_base, kv, j), halves);
  for (int j0 = 0; j0 < n_keys; j0 += 8) {
    const uint16_t* rows[8];
    const int m = key_block<8>(k_base, kv, n_keys, j0, halves, rows);
    __m512 a[16];
    for (auto& x : a) x = _mm512_setzero_ps();
    for (int c = 0; c < NC; ++c) {
      const __m512 qv0 = _mm512_loadu_ps(q0 + 16 * c), qv1 = _mm512_loadu_ps(q1 + 16 * c);
      for (int i = 0; i < 8; ++i) {
        const __m512 k = fmt.load16(rows[i], 16 * c);
        a[i] = _mm512_fmadd_ps(qv0, k, a[i]);
        a[8 + i] = _mm512_fmadd_ps(qv1, k, a[8 + i]);
      }
    }
    const __m512 s = _mm512_mul_ps(sum16(a), sv);
    const auto mask = static_cast<__mmask16>((1u << m) - 1);
    _mm512_mask_storeu_ps(s0 + j0, mask, s);
    _mm512_mask_storeu_ps(s1 + j0 - 8, static_cast<__mmask16>(mask << 8), s);  // lanes 8.. to keys j0..
  }
}

// out_h = Σ_j p_h[j] · v_j for heads h0..h0+HP-1 of a group (p_h = scores row h), keys in order, the
// HP outputs in registers; each value row is converted once for the HP heads.
template <int NC, int HP, class Rows>
void values_pass(const float* scores, int n_keys, const Rows& fmt, const uint16_t* v_base, const PagedKv& kv, int h0,
                 float* og) {
  const int halves = fmt.slice_halves(16 * NC);
  __m512 acc[HP][NC];
  for (auto& head : acc) {
    for (auto& x : head) x = _mm512_setzero_ps();
  }
  for (int j = 0; j < n_keys; ++j) {
    if (j + kValuesAhead < n_keys) prefetch_row_l2(key_row(v_base, kv, j + kValuesAhead), halves);
    if (j + kValuesAheadL1 < n_keys) prefetch_row(key_row(v_base, kv, j + kValuesAheadL1), halves);
    const uint16_t* v = key_row(v_base, kv, j);
    __m512 ps[HP];
    // Quantised rows: every block's p · d at once, one vector multiply a head, each spread to a whole
    // register when its block starts (the same products as one multiply a block: the same bits;
    // BM_AttentionStepQwen3Shape).
    __m512 pd[HP];
    for (int hh = 0; hh < HP; ++hh) {
      const float p = scores[static_cast<int64_t>(h0 + hh) * n_keys + j];
      if constexpr (Rows::kScaledCodes) {
        pd[hh] = _mm512_castps256_ps512(
            _mm256_mul_ps(_mm256_set1_ps(p), fmt.template scales8<16 * NC / kKvBlockElements>(v)));
      } else {
        ps[hh] = _mm512_set1_ps(p);
      }
    }
    for (int c = 0; c < NC; ++c) {
      if constexpr (Rows::kScaledCodes) {
        if (16 * c % kKvBlockElements == 0) {
          const __m512i lane = _mm512_set1_epi32(16 * c / kKvBlockElements);
          for (int hh = 0; hh < HP; ++hh) ps[hh] = _mm512_permutexvar_ps(lane, pd[hh]);
        }
      }
      const __m512 vv = fmt.codes16(v, 16 * c);
      for (int hh = 0; hh < HP; ++hh) acc[hh][c] = _mm512_fmadd_ps(ps[hh], vv, acc[hh][c]);
    }
  }
  for (int hh = 0; hh < HP; ++hh) {
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(og + (h0 + hh) * 16 * NC + 16 * c, acc[hh][c]);
  }
}

// ---- Q8_0 and Q4_0 keys: integer scores (q8_0_scores.h) over keys in lanes (key_lanes.h), 16 keys a register ----

// A query head quantised by quantise_query_ref's steps, with each block's code sum. VPDPBUSD multiplies
// unsigned by signed bytes: Q8_0 keys' codes are biased to unsigned (k + 128, once for all the heads
// that read them), Q4_0 keys' nibbles are unsigned (k + 8), and each block's sum is taken back by
// offset · sum[b], which leaves the exact integer Σ_i q_i · k_i.
struct Q8Head {
  alignas(64) int8_t codes[kMaxQ8QueryBlocks * kKvBlockElements];
  int32_t sum[kMaxQ8QueryBlocks];
  float d[kMaxQ8QueryBlocks];
};

// What the lanes of a key type hold before VPDPBUSD: the unsigned offset of its codes.
template <KvType T>
constexpr int32_t kLaneCodeOffset = T == KvType::Q8_0 ? 128 : 8;

template <int NB>  // blocks of the head: 2, 4 or 8
void quantise_head(const float* q, Q8Head& h) {
  for (int b = 0; b < NB; ++b) {
    const __m512 x0 = _mm512_loadu_ps(q + 32 * b), x1 = _mm512_loadu_ps(q + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    h.d[b] = q8_query_scale(amax);
    const __m512 m = _mm512_set1_ps(q8_query_multiplier(amax));
    const __m128i c0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x0, m)));
    const __m128i c1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x1, m)));
    _mm_store_si128(reinterpret_cast<__m128i*>(h.codes + 32 * b), c0);
    _mm_store_si128(reinterpret_cast<__m128i*>(h.codes + 32 * b + 16), c1);
    h.sum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_cvtepi8_epi32(c0), _mm512_cvtepi8_epi32(c1)));
  }
}

// Keys key0 .. key0 + m − 1 (absolute numbers; m ≤ 16) as the runs of them that share a page, each
// with its page's chunk and the addresses its lane 0 would read block 0's codes and scales at (a
// run's own lanes only are read: masked loads, or one plain load for 16 keys of one page). Lanes from
// m on read nothing (zero codes and scales: a score of 0).
struct LaneRuns {
  const uint8_t* chunk[16];
  const uint8_t* codes0[16];
  const uint16_t* scales0[16];
  __mmask16 mask[16];
  int t[16];
  int n = 0;
  int groups;  // groups of 4 code bytes a block (KeyLanes::groups)
  int64_t group_bytes, block_scales, chunk_bytes;  // bytes 4g.. of block b at (b · groups + g) · group_bytes

  LaneRuns(const KeyLanes& k, int key0, int m)
      : groups(k.groups), group_bytes(4 * int64_t(k.page_tokens)), block_scales(k.page_tokens), chunk_bytes(k.chunk_bytes) {
    for (int l = 0; l < m;) {
      int page, t0;
      k.locate(key0 + l, page, t0);
      const int count = min_int(k.page_tokens - t0, m - l);
      chunk[n] = k.chunk(page);
      codes0[n] = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(k.codes(chunk[n], 0, 0) + 4 * t0) - 4 * unsigned(l));
      scales0[n] = reinterpret_cast<const uint16_t*>(reinterpret_cast<uintptr_t>(k.scales(chunk[n], 0) + t0) - 2 * unsigned(l));
      mask[n] = static_cast<__mmask16>(((1u << count) - 1) << l);
      t[n++] = t0;
      l += count;
    }
  }
  // Code bytes 4g..4g+3 of the head's block b, a key a lane. kOneRun: n is 1.
  template <bool kOneRun>
  __m512i bytes(int b, int g) const {
    const int64_t at = (b * groups + g) * group_bytes;
    __m512i v = mask[0] == 0xFFFF ? _mm512_loadu_si512(codes0[0] + at) : _mm512_maskz_loadu_epi32(mask[0], codes0[0] + at);
    if constexpr (!kOneRun) {
      for (int r = 1; r < n; ++r) v = _mm512_mask_loadu_epi32(v, mask[r], codes0[r] + at);
    }
    return v;
  }
  // The scales of the head's block b, a key a lane.
  template <bool kOneRun>
  __m512 scales(int b) const {
    const uint16_t* first = scales0[0] + b * block_scales;
    __m256i v = mask[0] == 0xFFFF ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first))
                                  : _mm256_maskz_loadu_epi16(mask[0], first);
    if constexpr (!kOneRun) {
      for (int r = 1; r < n; ++r) v = _mm256_mask_loadu_epi16(v, mask[r], scales0[r] + b * block_scales);
    }
    return _mm512_cvtph_ps(v);
  }
  // Prefetches into L2 the chunks of the runs, or only of those that enter their page (kEntered: the
  // others were prefetched with the span that entered it).
  template <bool kEntered>
  void prefetch() const {
    for (int r = 0; r < n; ++r) {
      if (kEntered && t[r] != 0) continue;
      for (int64_t at = 0; at < chunk_bytes; at += 64) _mm_prefetch(reinterpret_cast<const char*>(chunk[r] + at), _MM_HINT_T1);
    }
  }
};

// Lane i of out[h]: q8_0_key_score_ref of head h against the keys of `runs` (keys of type T), for NH
// heads; each key's codes are loaded and made unsigned once for all of them.
template <KvType T, int NB, int NH, bool kOneRun>
void q8_lane_scores(const Q8Head* heads, const LaneRuns& runs, __m512* out) {
  for (int b = 0; b < NB; ++b) {
    __m512i sum[NH];
    for (auto& s : sum) s = _mm512_setzero_si512();
    // The 16 keys' unsigned codes of elements at..at+3 against the heads' codes there.
    const auto dot = [&](__m512i codes, int at) {
      for (int h = 0; h < NH; ++h) {
        int32_t q4;
        std::memcpy(&q4, heads[h].codes + 32 * b + at, 4);
        sum[h] = _mm512_dpbusd_epi32(sum[h], codes, _mm512_set1_epi32(q4));
      }
    };
    if constexpr (T == KvType::Q8_0) {
      for (int g = 0; g < 8; ++g) dot(_mm512_xor_si512(runs.bytes<kOneRun>(b, g), _mm512_set1_epi8(static_cast<char>(0x80))), 4 * g);
    } else {  // byte i: element i in its low nibble, i + 16 in its high one
      const __m512i low4 = _mm512_set1_epi8(0x0F);
      for (int g = 0; g < 4; ++g) {
        const __m512i packed = runs.bytes<kOneRun>(b, g);
        dot(_mm512_and_si512(packed, low4), 4 * g);
        dot(_mm512_and_si512(_mm512_srli_epi16(packed, 4), low4), 16 + 4 * g);
      }
    }
    const __m512 dk = runs.scales<kOneRun>(b);
    for (int h = 0; h < NH; ++h) {
      const __m512i offset = _mm512_set1_epi32(kLaneCodeOffset<T> * heads[h].sum[b]);
      const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum[h], offset)),
                                     _mm512_mul_ps(_mm512_set1_ps(heads[h].d[b]), dk));
      out[h] = b == 0 ? t : _mm512_add_ps(out[h], t);
    }
  }
}

template <KvType T, int NB, int NH>
void q8_lane_scores(const Q8Head* heads, const LaneRuns& runs, __m512* out) {
  if (runs.n == 1) return q8_lane_scores<T, NB, NH, true>(heads, runs, out);
  q8_lane_scores<T, NB, NH, false>(heads, runs, out);
}

// q8_lane_scores for nh (1..4) heads.
template <KvType T, int NB>
void q8_lane_scores(const Q8Head* heads, int nh, const LaneRuns& runs, __m512* out) {
  switch (nh) {
    case 1: return q8_lane_scores<T, NB, 1>(heads, runs, out);
    case 2: return q8_lane_scores<T, NB, 2>(heads, runs, out);
    case 3: return q8_lane_scores<T, NB, 3>(heads, runs, out);
    default: return q8_lane_scores<T, NB, 4>(heads, runs, out);
  }
}

// Heads quantised at a time: their keys are read once for all of them.
constexpr int kQ8HeadsAtOnce = 4;

// scores[h * n_keys + j] = score(q_h, key head.first_key + j) · scale for the n_gqa heads of one
// group, kQ8HeadsAtOnce heads over 16 keys at a time.
template <KvType T, int NC>
void q8_scores_group(const float* qg, const PagedKv& head, int n_keys, int n_gqa, float scale, float* scores) {
  constexpr int NB = NC / 2;
  const __m512 sv = _mm512_set1_ps(scale);
  const KeyLanes k(head, 16 * NC);
  for (int h0 = 0; h0 < n_gqa; h0 += kQ8HeadsAtOnce) {
    const int nh = min_int(kQ8HeadsAtOnce, n_gqa - h0);
    Q8Head heads[kQ8HeadsAtOnce];
    for (int h = 0; h < nh; ++h) quantise_head<NB>(qg + (h0 + h) * 16 * NC, heads[h]);
    for (int j = 0; j < min_int(kLaneKeysAhead, n_keys); j += 16) {
      LaneRuns(k, k.first_key + j, min_int(16, n_keys - j)).prefetch<false>();
    }
    for (int j0 = 0; j0 < n_keys; j0 += 16) {
      if (j0 + kLaneKeysAhead < n_keys) {
        LaneRuns(k, k.first_key + j0 + kLaneKeysAhead, min_int(16, n_keys - j0 - kLaneKeysAhead)).prefetch<true>();
      }
      const int m = min_int(16, n_keys - j0);
      __m512 s[kQ8HeadsAtOnce];
      q8_lane_scores<T, NB>(heads, nh, LaneRuns(k, k.first_key + j0, m), s);
      for (int h = 0; h < nh; ++h) {
        _mm512_mask_storeu_ps(scores + int64_t(h0 + h) * n_keys + j0, static_cast<__mmask16>((1u << m) - 1),
                              _mm512_mul_ps(s[h], sv));
      }
    }
  }
}

template <int NC, class Rows>
void attention_nc(const float* q, const PagedKv& kv, const Rows& fmt, int n_keys, int n_head, int n_kv_head,
                  float scale, float* out, float* scratch) {
  constexpr int kHeadDim = 16 * NC, kHeadsPerPass = 16 / NC;  // 16 accumulators
  const int n_gqa = n_head / n_kv_head;
  for (int g = 0; g < n_kv_head; ++g) {
    const PagedKv head = kv_head(kv, static_cast<int64_t>(g) * kHeadDim);
    const float* qg = q + static_cast<int64_t>(g) * n_gqa * kHeadDim;
    float* og = out + static_cast<int64_t>(g) * n_gqa * kHeadDim;
    if constexpr (Rows::kIntegerScores) {
      q8_scores_group<Rows::kType, NC>(qg, head, n_keys, n_gqa, scale, scratch);
    } else {
      int paired = 0;
      for (; paired + 2 <= n_gqa; paired += 2) scores_pair_by_8<NC>(qg, fmt, head.k_base, kv, n_keys, paired, scale, scratch);
      if (paired < n_gqa) scores_by_16<NC>(qg, fmt, head.k_base, kv, n_keys, paired, n_gqa, scale, scratch);
    }
    for (int j = 0; j < min_int(kValuesAhead, n_keys); ++j) {
      prefetch_row_l2(key_row(head.v_base, kv, j), fmt.slice_halves(kHeadDim));
    }
    for (int h = 0; h < n_gqa; ++h) softmax_avx512(scratch + static_cast<int64_t>(h) * n_keys, n_keys);
    int h0 = 0;
    for (; h0 + kHeadsPerPass <= n_gqa; h0 += kHeadsPerPass) {
      values_pass<NC, kHeadsPerPass>(scratch, n_keys, fmt, head.v_base, kv, h0, og);
    }
    for (; h0 < n_gqa; ++h0) values_pass<NC, 1>(scratch, n_keys, fmt, head.v_base, kv, h0, og);
  }
}

// ---- Blocks of rows (attention_rows_avx512): a prefill's or a bert sequence's consecutive rows ----
// Every (vector, key) score and every output element takes the steps of the one-row kernel above; the
// block only shares loads and conversions: each key is widened to f32 once for all the block's vectors,
// each value chunk converted once for a tile of vectors (BM_AttentionRowsPrefill).

// Scores of a tile of kTileVectors vectors × kTileKeys keys: 16 FMA chains, one sum16.
constexpr int kTileVectors = 4, kTileKeys = 16 / kTileVectors;
// The values pass over this many keys at a time, whose V slices stay in L1 while every tile of vectors
// and chunks reads them (BM_AttentionRowsPrefill).
constexpr int kBlockValueKeys = 128;

// Scores of vectors vs[0..n) (n ≤ kTileVectors, the rest of vs repeating the last) with the 16 keys
// j0.. widened in `keys` (row i: key j0 + i, 16 · NC floats), stored for the keys below span_end.
template <int NC>
void scores_tile(const Queries& qs, const int (&vs)[kTileVectors], int n, const float* keys, int j0, int span_end,
                 __m512 sv) {
  const float* q[kTileVectors];
  float* out[kTileVectors];  // where vector v's lanes (4v..4v+3) go: its scores of keys j0.. less 4v
  for (int v = 0; v < kTileVectors; ++v) {
    q[v] = qs.q(vs[v]);
    out[v] = qs.probs(vs[v], j0) - kTileKeys * v;
  }
  for (int t = 0; t < 16 && j0 + t < span_end; t += kTileKeys) {
    __m512 a[16];
    for (auto& x : a) x = _mm512_setzero_ps();
    for (int c = 0; c < NC; ++c) {
      __m512 qv[kTileVectors];
#pragma GCC unroll 4
      for (int v = 0; v < kTileVectors; ++v) qv[v] = _mm512_loadu_ps(q[v] + 16 * c);
#pragma GCC unroll 4
      for (int i = 0; i < kTileKeys; ++i) {
        const __m512 k = _mm512_load_ps(keys + (t + i) * 16 * NC + 16 * c);
#pragma GCC unroll 4
        for (int v = 0; v < kTileVectors; ++v) a[kTileKeys * v + i] = _mm512_fmadd_ps(qv[v], k, a[kTileKeys * v + i]);
      }
    }
    const __m512 s = _mm512_mul_ps(sum16(a), sv);
    // the keys in the span, as lanes 0..3; stored to lanes 4v.. for vector v (the others are not written)
    const auto keys_in_span = static_cast<unsigned>((1u << min_int(kTileKeys, span_end - (j0 + t))) - 1);
    for (int v = 0; v < n; ++v) {
      _mm512_mask_storeu_ps(out[v] + t, static_cast<__mmask16>(keys_in_span << (kTileKeys * v)), s);
    }
  }
}

// Every vector's scores over the span, 16 keys at a time (lanes outside a vector's own keys are
// computed and never read).
template <int NC, class Rows>
void scores_block(const Queries& qs, const Rows& fmt, const uint16_t* k_base, PagedKv kv, const KeySpan& span,
                  float scale) {
  const __m512 sv = _mm512_set1_ps(scale);
  const int halves = fmt.slice_halves(16 * NC);
  alignas(64) float keys[16 * 16 * NC];
  kv.first_key = 0;  // key_row takes absolute key numbers
  for (int j = span.begin; j < min_int(span.begin + kKeysAhead, span.end); ++j) {
    prefetch_row_l2(key_row(k_base, kv, j), halves);
  }
  for (int j0 = span.begin; j0 < span.end; j0 += 16) {
    const uint16_t* rows[16];
    key_block<16>(k_base, kv, span.end, j0, halves, rows);
    for (int i = 0; i < 16; ++i) {
      for (int c = 0; c < NC; ++c) _mm512_store_ps(keys + i * 16 * NC + 16 * c, fmt.load16(rows[i], 16 * c));
    }
    int vs[kTileVectors], n = 0;
    for (int v = 0; v < qs.count(); ++v) {
      if (qs.begin(v) >= j0 + 16 || qs.end(v) <= j0) continue;  // none of its keys in this block
      vs[n++] = v;
      if (n == kTileVectors) {
        scores_tile<NC>(qs, vs, n, keys, j0, span.end, sv);
        n = 0;
      }
    }
    if (n > 0) {
      for (int v = n; v < kTileVectors; ++v) vs[v] = vs[n - 1];
      scores_tile<NC>(qs, vs, n, keys, j0, span.end, sv);
    }
  }
}

// Every vector's integer scores over its keys: the span's groups of 16 keys that hold any of them,
// kQ8HeadsAtOnce vectors at a time sharing each group's codes.
template <KvType T, int NC>
void q8_scores_block(const Queries& qs, PagedKv kv, const KeySpan& span, float scale) {
  constexpr int NB = NC / 2;
  const __m512 sv = _mm512_set1_ps(scale);
  kv.first_key = 0;  // absolute key numbers
  const KeyLanes k(kv, 16 * NC);
  for (int v0 = 0; v0 < qs.count(); v0 += kQ8HeadsAtOnce) {
    const int nv = min_int(kQ8HeadsAtOnce, qs.count() - v0);
    Q8Head heads[kQ8HeadsAtOnce];
    int begin = span.end, end = span.begin;
    for (int v = 0; v < nv; ++v) {
      quantise_head<NB>(qs.q(v0 + v), heads[v]);
      begin = min_int(begin, qs.begin(v0 + v));
      end = end > qs.end(v0 + v) ? end : qs.end(v0 + v);
    }
    const int first = span.begin + (begin - span.begin) / 16 * 16;
    for (int j = first; j < min_int(first + kLaneKeysAhead, end); j += 16) LaneRuns(k, j, min_int(16, span.end - j)).prefetch<false>();
    for (int j0 = first; j0 < end; j0 += 16) {
      if (j0 + kLaneKeysAhead < end) LaneRuns(k, j0 + kLaneKeysAhead, min_int(16, span.end - j0 - kLaneKeysAhead)).prefetch<true>();
      const int m = min_int(16, span.end - j0);
      __m512 s[kQ8HeadsAtOnce];
      q8_lane_scores<T, NB>(heads, nv, LaneRuns(k, j0, m), s);
      for (int v = 0; v < nv; ++v) {
        if (qs.begin(v0 + v) >= j0 + 16 || qs.end(v0 + v) <= j0) continue;  // none of its keys in this group
        _mm512_mask_storeu_ps(qs.probs(v0 + v, j0), static_cast<__mmask16>((1u << m) - 1), _mm512_mul_ps(s[v], sv));
      }
    }
  }
}

// out[v] chunks c0..c0+CB−1 += Σ p_v[j] · v_j over keys [k0, k1) in order, for VB vectors vs held in
// registers across the keys.
template <int VB, int CB, class Rows>
void values_tile(const Queries& qs, const int* vs, int c0, int k0, int k1, const Rows& fmt, const uint16_t* v_base,
                 const PagedKv& kv, bool prefetch) {
  __m512 acc[VB][CB];
  float* out[VB];
  const float* p[VB];
  for (int v = 0; v < VB; ++v) {
    out[v] = qs.out(vs[v]) + 16 * c0;
    p[v] = qs.probs(vs[v], k0);
    for (int c = 0; c < CB; ++c) acc[v][c] = _mm512_loadu_ps(out[v] + 16 * c);
  }
  for (int j = k0; j < k1; ++j) {
    if (prefetch && j + kValuesAhead < k1) {
      prefetch_row_l2(key_row(v_base, kv, j + kValuesAhead), fmt.slice_halves(qs.head_dim));
    }
    const uint16_t* row = key_row(v_base, kv, j);
    __m512 pb[VB], ps[VB];
    for (int v = 0; v < VB; ++v) ps[v] = pb[v] = _mm512_set1_ps(p[v][j - k0]);
    for (int c = 0; c < CB; ++c) {
      if constexpr (Rows::kScaledCodes) {  // values_pass's steps
        if (16 * (c0 + c) % kKvBlockElements == 0) {
          const __m512 d = fmt.scale16(row, 16 * (c0 + c));
          for (int v = 0; v < VB; ++v) ps[v] = _mm512_mul_ps(pb[v], d);
        }
      }
      const __m512 vv = fmt.codes16(row, 16 * (c0 + c));
      for (int v = 0; v < VB; ++v) acc[v][c] = _mm512_fmadd_ps(ps[v], vv, acc[v][c]);
    }
  }
  for (int v = 0; v < VB; ++v) {
    for (int c = 0; c < CB; ++c) _mm512_storeu_ps(out[v] + 16 * c, acc[v][c]);
  }
}

// The last n (< VB) vectors of a values range.
template <int VB, int CB, class Rows>
void values_rest(int n, const Queries& qs, const int* vs, int c0, int k0, int k1, const Rows& fmt,
                 const uint16_t* v_base, const PagedKv& kv, bool prefetch) {
  if constexpr (VB > 1) {
    if (n < VB) return values_rest<VB - 1, CB>(n, qs, vs, c0, k0, k1, fmt, v_base, kv, prefetch);
  }
  values_tile<VB, CB>(qs, vs, c0, k0, k1, fmt, v_base, kv, prefetch);
}

// The values over keys [key_begin, key_end) for vectors vs[0..n), all of which read them: tiles of 6
// vectors × 4 chunks (24 accumulators; one value chunk's conversion serves 6 FMAs, where 3 × 8 served 3:
// BM_AttentionRowsPrefill at qwen3's 128 wide heads), kBlockValueKeys keys at a time.
template <int NC, class Rows>
void values_range(const Queries& qs, const int* vs, int n, int key_begin, int key_end, const Rows& fmt,
                  const uint16_t* v_base, const PagedKv& kv) {
  constexpr int kValueChunks = 4, kValueVectors = 6;
  static_assert(NC % kValueChunks == 0, "the tiles cover the head's chunks exactly");
  for (int k0 = key_begin; k0 < key_end; k0 += kBlockValueKeys) {
    const int k1 = min_int(key_end, k0 + kBlockValueKeys);
    for (int i = 0; i < n; i += kValueVectors) {
      for (int c0 = 0; c0 < NC; c0 += kValueChunks) {
        const bool first = i == 0 && c0 == 0;  // the first pass over the keys fetches their rows
        if (n - i >= kValueVectors) {
          values_tile<kValueVectors, kValueChunks>(qs, vs + i, c0, k0, k1, fmt, v_base, kv, first);
        } else {
          values_rest<kValueVectors - 1, kValueChunks>(n - i, qs, vs + i, c0, k0, k1, fmt, v_base, kv, first);
        }
      }
    }
  }
}

template <int NC, class Rows>
void attention_block(const AttentionRows& rows, PagedKv kv, const Rows& fmt, int n_gqa, float scale, float* scratch) {
  const KeySpan span = key_span(rows);
  const Queries qs(rows, n_gqa, 16 * NC, span, scratch);
  if constexpr (Rows::kIntegerScores) {
    q8_scores_block<Rows::kType, NC>(qs, kv, span, scale);
  } else {
    scores_block<NC>(qs, fmt, kv.k_base, kv, span, scale);
  }
  kv.first_key = 0;
  softmax_then_values(qs, span, softmax_avx512, [&](const int* vs, int n, int key_begin, int key_end) {
    values_range<NC>(qs, vs, n, key_begin, key_end, fmt, kv.v_base, kv);
  });
}

template <class Rows>
void attention_row_as(const Rows& fmt, const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head,
                      int head_dim, float scale, float* out, float* scratch) {
  switch (head_dim) {
    case 64: return attention_nc<4>(q, kv, fmt, n_keys, n_head, n_kv_head, scale, out, scratch);
    case 128: return attention_nc<8>(q, kv, fmt, n_keys, n_head, n_kv_head, scale, out, scratch);
    default: return attention_nc<16>(q, kv, fmt, n_keys, n_head, n_kv_head, scale, out, scratch);
  }
}

template <class Rows>
void attention_rows_as(const Rows& fmt, const AttentionRows& rows, const PagedKv& kv, int n_gqa, int head_dim,
                       float scale, float* scratch) {
  switch (head_dim) {
    case 64: return attention_block<4>(rows, kv, fmt, n_gqa, scale, scratch);
    case 128: return attention_block<8>(rows, kv, fmt, n_gqa, scale, scratch);
    default: return attention_block<16>(rows, kv, fmt, n_gqa, scale, scratch);
  }
}
}  // namespace

bool attention_avx512_supports(int head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

namespace {
template <KvType T>
void lane_scores_as(const float* q, const PagedKv& head, int n_keys, int n_gqa, int head_dim, float scale, float* scores) {
  switch (head_dim) {
    case 64: return q8_scores_group<T, 4>(q, head, n_keys, n_gqa, scale, scores);
    case 128: return q8_scores_group<T, 8>(q, head, n_keys, n_gqa, scale, scores);
    default: return q8_scores_group<T, 16>(q, head, n_keys, n_gqa, scale, scores);
  }
}
}  // namespace

void q8_0_scores_avx512(const float* q, const PagedKv& head, int n_keys, int n_gqa, int head_dim, float scale,
                        float* scores) {
  if (head.type == KvType::Q4_0) return lane_scores_as<KvType::Q4_0>(q, head, n_keys, n_gqa, head_dim, scale, scores);
  lane_scores_as<KvType::Q8_0>(q, head, n_keys, n_gqa, head_dim, scale, scores);
}

void attention_row_avx512(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                          float scale, float* out, float* scratch) {
  switch (kv.type) {
    case KvType::Q8_0: return attention_row_as(BlockRows<KvType::Q8_0>{}, q, kv, n_keys, n_head, n_kv_head, head_dim, scale, out, scratch);
    case KvType::Q4_0: return attention_row_as(BlockRows<KvType::Q4_0>{}, q, kv, n_keys, n_head, n_kv_head, head_dim, scale, out, scratch);
    default: return attention_row_as(F16Rows{}, q, kv, n_keys, n_head, n_kv_head, head_dim, scale, out, scratch);
  }
}

void attention_rows_avx512(const AttentionRows& rows, const PagedKv& kv, int n_gqa, int head_dim, float scale,
                           float* scratch) {
  if (rows.n_rows == 1) {  // a decode row: its own kernel, which converts keys on the fly
    PagedKv row = kv;
    row.first_key = rows.key_begin[0];
    attention_row_avx512(rows.q, row, rows.key_end[0] - rows.key_begin[0], n_gqa, 1, head_dim, scale, rows.out,
                         scratch);
    return;
  }
  switch (kv.type) {
    case KvType::Q8_0: return attention_rows_as(BlockRows<KvType::Q8_0>{}, rows, kv, n_gqa, head_dim, scale, scratch);
    case KvType::Q4_0: return attention_rows_as(BlockRows<KvType::Q4_0>{}, rows, kv, n_gqa, head_dim, scale, scratch);
    default: return attention_rows_as(F16Rows{}, rows, kv, n_gqa, head_dim, scale, scratch);
  }
}

}  // namespace infer::kernels
