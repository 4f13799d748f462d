// AVX2 attention of a block of query rows. Same steps and key order as attention_row_ref; the F16 keys
// and values are widened with F16C, Q8_0 and Q4_0 ones dequantised (exactly: attention.cpp) 8 at a
// time as they are read, except Q8_0 and Q4_0 keys in heads of whole blocks (in lanes), scored by
// integer dots (q8_0_scores.h). A key's score is one FMA chain over its 8-wide chunks and one fixed
// add tree, an output element one FMA chain over the row's keys in order, however the rows, heads, keys
// and chunks are tiled: a row's result does not depend on which other rows are in its block or on the
// thread that computed it (invariant 7).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/ops/attention_queries.h"
#include "kernels/x86/avx2/avx2_common.h"
#include "kernels/x86/hsum256.h"
#include "kernels/ops/key_rows.h"
#include "kernels/ops/q8_0_scores.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/quant/quant.h"
#include "kernels/x86/avx2/vec_exp_avx2.h"

namespace infer::kernels {
namespace {

// Keys of up to this width are widened once per block of 8 into a stack buffer for all the query
// vectors of a block of rows that read them.
constexpr int kMaxWidenedHeadDim = 256;
// The values' register tiles pass over the keys once per group of chunks: they take kValueKeys keys at a
// time, whose V slices stay in L1/L2 between the passes (BM_AttentionRowsPrefill, BM_AttentionRowQwen3Shape,
// BM_AttentionStepQwen3Shape).
constexpr int kValueKeys = 128;
// Rows this many keys ahead of the one being read are prefetched into L1, and kRowsAheadL2 ahead into
// L2, whose miss buffers keep more lines in flight: a head's rows are slices kv_dim apart, and pages
// scattered, which the hardware prefetchers do not follow (BM_AttentionStepQwen3Shape).
constexpr int kRowsAhead = 4, kRowsAheadL2 = 32;

inline void prefetch_row(const uint16_t* row, int halves) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int b = 0; b < halves * 2; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}
inline void prefetch_row_l2(const uint16_t* row, int halves) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int b = 0; b < halves * 2; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
}

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// How the kernels below read 8 elements of a row of the head's slice (which starts at the row pointer):
// load8(row, d) gives elements d..d+7 (d a multiple of 8) in f32; at(row, e) is where element e's
// storage starts (F16: the element, quantised: its block) and from(e) the reader of the slice from
// there; slice_halves(n) the 2-byte units n elements span, for prefetches. Quantised rows
// (kScaledCodes) also give a chunk's codes and its block's scale apart, so that the values pass takes
// each block's scale into the probability once, (p · d) · code, instead of scaling every chunk
// (BM_AttentionStepQwen3Shape with INFER_NO_AVX512=1), as the AVX-512 kernels do.
struct F16Rows {
  static constexpr bool kIntegerScores = false, kScaledCodes = false;
  __m256 load8(const uint16_t* row, int d) const { return load_f16x8(row + d); }
  const uint16_t* at(const uint16_t* row, int e) const { return row + e; }
  F16Rows from(int) const { return *this; }
  int slice_halves(int n) const { return n; }
};

template <KvType T>
struct BlockRows {
  int head_elem;  // the slice's first element in the first block (PagedKv::head_elem)
  static constexpr int kBlockHalves = int(kv_block_halves(T));
  static constexpr KvType kType = T;
  static constexpr bool kIntegerScores = true;  // q8_0_scores.h, where keys_in_lanes (heads of whole blocks)
  static constexpr bool kScaledCodes = true;
  // The codes of the slice's elements d..d+7 in f32, unscaled (exact).
  __m256 codes8(const uint16_t* row, int d) const {
    const int e = head_elem + d;
    const auto* codes = reinterpret_cast<const uint8_t*>(row + (e / kKvBlockElements) * kBlockHalves + 1);
    const int i = e % kKvBlockElements;
    __m256i wide;
    if constexpr (T == KvType::Q8_0) {
      wide = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
    } else {  // byte j: element j in its low nibble, j + 16 in its high one
      __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + (i & 15)));
      if (i >= 16) b = _mm_srli_epi16(b, 4);
      b = _mm_and_si128(b, _mm_set1_epi8(0x0F));
      wide = _mm256_sub_epi32(_mm256_cvtepu8_epi32(b), _mm256_set1_epi32(8));
    }
    return _mm256_cvtepi32_ps(wide);
  }
  // Which of the row's blocks holds the slice's element d, and that block's scale.
  int block_of(int d) const { return (head_elem + d) / kKvBlockElements; }
  float scale(const uint16_t* row, int block) const { return _cvtsh_ss(row[block * kBlockHalves]); }
  __m256 load8(const uint16_t* row, int d) const {
    return _mm256_mul_ps(codes8(row, d), _mm256_set1_ps(scale(row, block_of(d))));
  }
  const uint16_t* at(const uint16_t* row, int e) const {
    return row + (head_elem + e) / kKvBlockElements * kBlockHalves;
  }
  BlockRows from(int e) const { return BlockRows{(head_elem + e) % kKvBlockElements}; }
  int slice_halves(int n) const { return (head_elem + n + kKvBlockElements - 1) / kKvBlockElements * kBlockHalves; }
};

float dot_f32_f16(const float* q, const uint16_t* k, int n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int d = 0;
  for (; d + 32 <= n; d += 32) {
    for (int c = 0; c < 4; ++c) {
      acc[c] = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8 * c), load_f16x8(k + d + 8 * c), acc[c]);
    }
  }
  for (; d + 8 <= n; d += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load_f16x8(k + d), acc[0]);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; d < n; ++d) sum += q[d] * f16_to_f32(k[d]);
  return sum;
}

// Calls fn(j, rows, count) for the runs of keys j .. j+count-1 (keys kv.first_key + j ...) that lie in one
// page, in order, `rows` pointing at the first one's `row_halves`-long slice of its row (the
// others follow row_stride apart). A run lets its caller keep sums in registers across its keys. The
// next page's first rows are prefetched at each run's start: pages are scattered, which the hardware
// prefetcher does not follow; `into_l2` (rows read from memory, as a decode row's) also prefetches
// the rows kRowsAheadL2 on into L2.
template <typename Fn>
inline void for_each_key_run(const uint16_t* base, const PagedKv& kv, int n_keys, int row_halves, bool into_l2,
                             Fn&& fn) {
  // run j's length: to the end of its page or of the keys
  const auto run_keys = [&](int j) { return std::min(kv.page_tokens - (kv.first_key + j) % kv.page_tokens, n_keys - j); };
  const auto prefetch_run = [&](int j) {
    const uint16_t* first = key_row(base, kv, j);
    for (int i = 0; i < std::min(kRowsAhead, run_keys(j)); ++i) prefetch_row(first + int64_t(i) * kv.row_stride, row_halves);
  };
  if (n_keys > 0) prefetch_run(0);
  for (int j = 0; j < n_keys;) {
    const int count = run_keys(j);
    if (j + count < n_keys) prefetch_run(j + count);
    for (int i = j + kRowsAheadL2; into_l2 && i < std::min(j + kRowsAheadL2 + count, n_keys); ++i) {
      prefetch_row_l2(key_row(base, kv, i), row_halves);
    }
    fn(j, key_row(base, kv, j), count);
    j += count;
  }
}

// Calls fn(j, row) for keys j = 0..n_keys-1 in order (for_each_key_run, key by key, prefetching the
// run's rows kRowsAhead ahead).
template <typename Fn>
inline void for_each_key(const uint16_t* base, const PagedKv& kv, int n_keys, int row_halves, Fn&& fn) {
  for_each_key_run(base, kv, n_keys, row_halves, true, [&](int j, const uint16_t* rows, int count) {
    for (int i = 0; i < count; ++i) {
      const uint16_t* row = rows + int64_t(i) * kv.row_stride;
      if (i + kRowsAhead < count) prefetch_row(row + int64_t(kRowsAhead) * kv.row_stride, row_halves);
      fn(j + i, row);
    }
  });
}

// Chunk d of key i of a block of 8: read from the cache's rows, or from f32 rows widened once for
// several query vectors. Widening is exact, so both give the same scores.
template <class Rows>
struct CacheKeys {
  Rows fmt;
  const uint16_t* rows[8];
  __m256 chunk(int i, int d) const { return fmt.load8(rows[i], d); }
};
struct F32Keys {
  const float* rows;  // 8 rows of `stride` floats
  int stride;
  __m256 chunk(int i, int d) const { return _mm256_load_ps(rows + i * stride + d); }
};

// Dots of one query vector with 8 keys at once (n a multiple of 8): an FMA chain per key over the
// 8-wide chunks, then one add tree leaves the 8 sums in one vector. Every lane goes through the same
// arithmetic, so a key's score does not depend on its place among the 8.
template <typename Keys>
inline __m256 dot8(const float* q, const Keys& k, int n) {
  __m256 a[8];
  for (auto& x : a) x = _mm256_setzero_ps();
  for (int d = 0; d < n; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(qv, k.chunk(i, d), a[i]);
  }
  // hadd(a, b) = [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]
  const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  // lane i of s0123 holds key i's elements 0..3 (low half) and 4..7 (high half); likewise keys 4..7.
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// ---- Q8_0 and Q4_0 keys: integer scores (q8_0_scores.h) over keys in lanes (key_lanes.h), 8 keys a register ----

// A query head quantised by quantise_query_ref's steps, with each block's code sum (for Q4_0's nibbles,
// which are the codes + 8).
struct Q8Head {
  alignas(32) int8_t codes[kMaxQ8QueryBlocks * kKvBlockElements];
  int32_t sum[kMaxQ8QueryBlocks];
  float d[kMaxQ8QueryBlocks];
};

inline void quantise_head(const float* q, int n_blocks, Q8Head& h) {
  for (int b = 0; b < n_blocks; ++b) {
    __m256 x[4];
    for (int c = 0; c < 4; ++c) x[c] = _mm256_loadu_ps(q + 32 * b + 8 * c);
    const float amax = avx2::amax32(x);
    h.d[b] = q8_query_scale(amax);
    const __m256 m = _mm256_set1_ps(q8_query_multiplier(amax));
    __m256i i[4];
    for (int c = 0; c < 4; ++c) i[c] = _mm256_cvtps_epi32(_mm256_mul_ps(x[c], m));
    _mm256_store_si256(reinterpret_cast<__m256i*>(h.codes + 32 * b), avx2::pack_i8(i[0], i[1], i[2], i[3]));
    const __m128i sums = avx2::hsum4_i32(i[0], i[1], i[2], i[3]);  // codes within ±127: no saturation
    const __m128i halves = _mm_add_epi32(sums, _mm_shuffle_epi32(sums, 0x4E));
    h.sum[b] = _mm_cvtsi128_si32(_mm_add_epi32(halves, _mm_shuffle_epi32(halves, 0xB1)));
  }
}

// Keys key0 .. key0 + m − 1 (absolute numbers; m ≤ 8) as the runs of them that share a page: lanes
// lane[r] .. lane[r] + count[r] − 1 read run r, from token t[r] of its page. Lanes from m on read
// nothing (zero codes and scales: a score of 0).
struct LaneRuns {
  const uint8_t* chunk[8];
  int t[8], lane[8], count[8];
  int n = 0;

  LaneRuns(const KeyLanes& k, int key0, int m) {
    for (int l = 0; l < m;) {
      int page, t0;
      k.locate(key0 + l, page, t0);
      chunk[n] = k.chunk(page);
      t[n] = t0;
      lane[n] = l;
      count[n] = std::min(k.page_tokens - t0, m - l);
      l += count[n++];
    }
  }
  bool whole() const { return n == 1 && count[0] == 8; }
  // Code bytes 4g..4g+3 of the head's block b, a key a lane.
  __m256i bytes(const KeyLanes& k, int b, int g) const {
    if (whole()) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.codes(chunk[0], b, g) + 4 * t[0]));
    alignas(32) int32_t v[8] = {};
    for (int r = 0; r < n; ++r) std::memcpy(v + lane[r], k.codes(chunk[r], b, g) + 4 * t[r], 4 * size_t(count[r]));
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(v));
  }
  // The scales of the head's block b, a key a lane.
  __m256 scales(const KeyLanes& k, int b) const {
    if (whole()) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k.scales(chunk[0], b) + t[0])));
    alignas(16) uint16_t v[8] = {};
    for (int r = 0; r < n; ++r) std::memcpy(v + lane[r], k.scales(chunk[r], b) + t[r], 2 * size_t(count[r]));
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(v)));
  }
  // Prefetches into L2 the chunks of the runs, or only of those that enter their page (kEntered: the
  // others were prefetched with the group that entered it).
  template <bool kEntered>
  void prefetch(const KeyLanes& k) const {
    for (int r = 0; r < n; ++r) {
      if (kEntered && t[r] != 0) continue;
      for (int64_t at = 0; at < k.chunk_bytes; at += 64) _mm_prefetch(reinterpret_cast<const char*>(chunk[r] + at), _MM_HINT_T1);
    }
  }
};

// Vectors quantised at a time: their keys are read once for all of them.
constexpr int kQ8HeadsAtOnce = 4;

// Lane i of out[h]: q8_0_key_score_ref of heads[h] against the keys of `runs` (keys of type T), for
// NH heads; each key's codes are loaded once for all of them. VPMADDUBSW multiplies unsigned by signed
// bytes: for Q8_0, q · k = |k| · (q with k's sign), whose pairs fit 16 bits (codes within ±127); Q4_0's
// nibbles are unsigned (k + 8), and each block's sum is taken back by 8 · Σ q.
template <KvType T, int NH>
void q8_lane_scores(const Q8Head* heads, int n_blocks, const KeyLanes& k, const LaneRuns& runs, __m256* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int b = 0; b < n_blocks; ++b) {
    __m256i sum[NH];
    for (auto& s : sum) s = _mm256_setzero_si256();
    if constexpr (T == KvType::Q8_0) {
      for (int g = 0; g < 8; ++g) {
        const __m256i codes = runs.bytes(k, b, g), magnitudes = _mm256_abs_epi8(codes);
        for (int h = 0; h < NH; ++h) {
          int32_t q4;
          std::memcpy(&q4, heads[h].codes + 32 * b + 4 * g, 4);
          const __m256i signed_q = _mm256_sign_epi8(_mm256_set1_epi32(q4), codes);
          sum[h] = _mm256_add_epi32(sum[h], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitudes, signed_q), ones));
        }
      }
    } else {  // byte i: element i in its low nibble, i + 16 in its high one
      const __m256i low4 = _mm256_set1_epi8(0x0F);
      for (int g = 0; g < 4; ++g) {
        const __m256i packed = runs.bytes(k, b, g);
        const __m256i lo = _mm256_and_si256(packed, low4), hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
        for (int h = 0; h < NH; ++h) {
          int32_t q_lo, q_hi;
          std::memcpy(&q_lo, heads[h].codes + 32 * b + 4 * g, 4);
          std::memcpy(&q_hi, heads[h].codes + 32 * b + 16 + 4 * g, 4);
          const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(q_lo)),
                                                 _mm256_maddubs_epi16(hi, _mm256_set1_epi32(q_hi)));
          sum[h] = _mm256_add_epi32(sum[h], _mm256_madd_epi16(pairs, ones));
        }
      }
      for (int h = 0; h < NH; ++h) sum[h] = _mm256_sub_epi32(sum[h], _mm256_set1_epi32(8 * heads[h].sum[b]));
    }
    const __m256 dk = runs.scales(k, b);
    for (int h = 0; h < NH; ++h) {
      const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(sum[h]), _mm256_mul_ps(_mm256_set1_ps(heads[h].d[b]), dk));
      out[h] = b == 0 ? t : _mm256_add_ps(out[h], t);
    }
  }
}

// q8_lane_scores for nh (1..4) heads: a register each.
template <KvType T>
void q8_lane_scores(const Q8Head* heads, int nh, int n_blocks, const KeyLanes& k, const LaneRuns& runs, __m256* out) {
  switch (nh) {
    case 1: return q8_lane_scores<T, 1>(heads, n_blocks, k, runs, out);
    case 2: return q8_lane_scores<T, 2>(heads, n_blocks, k, runs, out);
    case 3: return q8_lane_scores<T, 3>(heads, n_blocks, k, runs, out);
    default: return q8_lane_scores<T, 4>(heads, n_blocks, k, runs, out);
  }
}

// scores_by_8's scores by integer dots: the groups of 8 keys from span_begin that hold any of a
// vector's keys, kQ8HeadsAtOnce vectors sharing each group's codes (a group's lanes past the span
// score 0).
template <KvType T>
void q8_scores_by_8(const Queries& qs, PagedKv kv, int span_end, float scale) {
  const int n_blocks = qs.head_dim / kKvBlockElements;
  const __m256 sv = _mm256_set1_ps(scale);
  kv.first_key = 0;  // absolute key numbers
  const KeyLanes k(kv, qs.head_dim);
  const int v_halves = n_blocks * int(kv_block_halves(T));
  for (int v0 = 0; v0 < qs.count(); v0 += kQ8HeadsAtOnce) {
    const int nv = std::min(kQ8HeadsAtOnce, qs.count() - v0);
    Q8Head heads[kQ8HeadsAtOnce];
    int begin = span_end, end = qs.span_begin;
    for (int v = 0; v < nv; ++v) {
      quantise_head(qs.q(v0 + v), n_blocks, heads[v]);
      begin = std::min(begin, qs.begin(v0 + v));
      end = std::max(end, qs.end(v0 + v));
    }
    const int first = qs.span_begin + (begin - qs.span_begin) / 8 * 8;
    for (int j = first; j < std::min(first + kLaneKeysAhead, end); j += 8) {
      LaneRuns(k, j, std::min(8, span_end - j)).prefetch<false>(k);
    }
    for (int j0 = first; j0 < end; j0 += 8) {
      if (j0 + kLaneKeysAhead < end) LaneRuns(k, j0 + kLaneKeysAhead, std::min(8, span_end - j0 - kLaneKeysAhead)).prefetch<true>(k);
      // The value rows of these keys, for the values pass: scoring keys in lanes leaves no stride for
      // the hardware to carry on into them, as scoring key rows did (BM_AttentionStepQwen3Shape)
      for (int j = j0; v0 == 0 && j < std::min(j0 + 8, span_end); ++j) prefetch_row_l2(key_row(kv.v_base, kv, j), v_halves);
      __m256 s[kQ8HeadsAtOnce];
      q8_lane_scores<T>(heads, nv, n_blocks, k, LaneRuns(k, j0, std::min(8, span_end - j0)), s);
      for (int v = v0; v < v0 + nv; ++v) {
        if (j0 + 8 <= qs.begin(v) || j0 >= qs.end(v)) continue;  // no key of this vector's in the group
        _mm256_storeu_ps(qs.probs(v, j0), _mm256_mul_ps(s[v - v0], sv));
      }
    }
  }
}

// Every query vector's scores (q_v · k_j) · scale over its keys, 8 keys at a time from span_begin
// (a block's lanes past a vector's keys are computed and never read; past the span they repeat its
// last key). head_dim is a multiple of 8.
template <class Rows>
void scores_by_8(const Queries& qs, const Rows& fmt, const uint16_t* k_base, PagedKv kv, int span_end, float scale) {
  if constexpr (Rows::kIntegerScores) {
    if (keys_in_lanes(Rows::kType, qs.head_dim)) return q8_scores_by_8<Rows::kType>(qs, kv, span_end, scale);
  }
  const int hd = qs.head_dim, n_vec = qs.count(), halves = fmt.slice_halves(hd);
  const __m256 sv = _mm256_set1_ps(scale);
  // one or two vectors (a decode row) convert on the fly: widening would cost stores that a memory-bound
  // step does not win back (BM_AttentionStepQwen3Shape)
  const bool widen = n_vec > 2 && hd <= kMaxWidenedHeadDim;
  alignas(32) float widened[8 * kMaxWidenedHeadDim];
  const F32Keys f32{widened, hd};
  kv.first_key = 0;  // key_row takes absolute key numbers
  for (int j0 = qs.span_begin; j0 < span_end; j0 += 8) {
    CacheKeys<Rows> f16{fmt, {}};
    for (int i = 0; i < 8; ++i) f16.rows[i] = key_row(k_base, kv, std::min(j0 + i, span_end - 1));
    for (int j = j0 + 8; j < std::min(j0 + 16, span_end); ++j) prefetch_row(key_row(k_base, kv, j), halves);  // the next block's
    for (int j = j0 + kRowsAheadL2; !widen && j < std::min(j0 + kRowsAheadL2 + 8, span_end); ++j) {
      prefetch_row_l2(key_row(k_base, kv, j), halves);
    }
    if (widen) {
      for (int i = 0; i < 8; ++i) {
        for (int d = 0; d < hd; d += 8) _mm256_store_ps(widened + i * hd + d, f16.chunk(i, d));
      }
    }
    for (int v = 0; v < n_vec; ++v) {
      if (j0 + 8 <= qs.begin(v) || j0 >= qs.end(v)) continue;  // no key of this vector's in the block
      const __m256 s = widen ? dot8(qs.q(v), f32, hd) : dot8(qs.q(v), f16, hd);
      _mm256_storeu_ps(qs.probs(v, j0), _mm256_mul_ps(s, sv));
    }
  }
}

// out[q][8·(chunk0+c) ..] += Σ p[q][j] · v_j over keys key_begin.. key_end-1 in order, for QB query
// vectors and CB 8-wide chunks held in registers across the keys; p[q] is indexed from key_begin.
// `ahead_halves`: how much of each row ahead to prefetch (the first pass fetches the head's whole
// slice for the later ones).
template <int QB, int CB, class Rows>
void values_tile(float* const* out, const float* const* p, int chunk0, int key_begin, int key_end, const Rows& fmt,
                 const uint16_t* v_base, PagedKv kv, int ahead_halves) {
  kv.first_key = key_begin;
  const bool into_l2 = QB <= 2;  // a decode row's vectors: the rows come from memory
  const Rows sub = fmt.from(8 * chunk0);
  for_each_key_run(fmt.at(v_base, 8 * chunk0), kv, key_end - key_begin, ahead_halves, into_l2,
                   [&](int j0, const uint16_t* v, int count) {
    __m256 acc[QB][CB];  // in registers for the run, not across the lambda's calls
    for (int q = 0; q < QB; ++q) {
      for (int c = 0; c < CB; ++c) acc[q][c] = _mm256_loadu_ps(out[q] + 8 * (chunk0 + c));
    }
    for (int j = j0; j < j0 + count; ++j, v += kv.row_stride) {
      if (j + kRowsAhead < j0 + count) prefetch_row(v + int64_t(kRowsAhead) * kv.row_stride, ahead_halves);
      if constexpr (Rows::kScaledCodes) {
        __m256 pd[QB];  // p · d of the chunks' current block
        int block = -1;
        for (int c = 0; c < CB; ++c) {
          if (sub.block_of(8 * c) != block) {
            block = sub.block_of(8 * c);
            const float d = sub.scale(v, block);
            for (int q = 0; q < QB; ++q) pd[q] = _mm256_set1_ps(p[q][j] * d);
          }
          const __m256 codes = sub.codes8(v, 8 * c);
          for (int q = 0; q < QB; ++q) acc[q][c] = _mm256_fmadd_ps(pd[q], codes, acc[q][c]);
        }
      } else {
        __m256 pb[QB];
        for (int q = 0; q < QB; ++q) pb[q] = _mm256_broadcast_ss(p[q] + j);
        for (int c = 0; c < CB; ++c) {
          const __m256 vv = sub.load8(v, 8 * c);
          for (int q = 0; q < QB; ++q) acc[q][c] = _mm256_fmadd_ps(pb[q], vv, acc[q][c]);
        }
      }
    }
    for (int q = 0; q < QB; ++q) {
      for (int c = 0; c < CB; ++c) _mm256_storeu_ps(out[q] + 8 * (chunk0 + c), acc[q][c]);
    }
  });
}

// The last `rest` (< the full tile's) chunks.
template <int QB, int CB, class Rows>
void values_rest(int rest, float* const* out, const float* const* p, int chunk0, int key_begin, int key_end,
                 const Rows& fmt, const uint16_t* v_base, const PagedKv& kv, int ahead_halves) {
  if constexpr (CB > 0) {
    if (rest == CB) return values_tile<QB, CB>(out, p, chunk0, key_begin, key_end, fmt, v_base, kv, ahead_halves);
    values_rest<QB, CB - 1>(rest, out, p, chunk0, key_begin, key_end, fmt, v_base, kv, ahead_halves);
  }
}

// Chunks a register tile of qb query vectors holds (accumulators, broadcast probabilities and a
// value chunk within the 16 registers).
constexpr int register_chunks(int qb) { return qb == 1 ? 8 : qb == 2 ? 4 : 3; }

// Tiles of QB vectors × register_chunks(QB) chunks across all `chunks` of the head.
template <int QB, class Rows>
void values_chunks(float* const* out, const float* const* p, int chunks, int key_begin, int key_end, const Rows& fmt,
                   const uint16_t* v_base, const PagedKv& kv) {
  constexpr int kChunks = register_chunks(QB);
  const auto ahead = [&](int c0) {
    return fmt.from(8 * c0).slice_halves(c0 == 0 ? 8 * chunks : 8 * std::min(kChunks, chunks - c0));
  };
  int c0 = 0;
  for (; c0 + kChunks <= chunks; c0 += kChunks) {
    values_tile<QB, kChunks>(out, p, c0, key_begin, key_end, fmt, v_base, kv, ahead(c0));
  }
  values_rest<QB, kChunks - 1>(chunks - c0, out, p, c0, key_begin, key_end, fmt, v_base, kv, ahead(c0));
}

// The values' pass over keys [key_begin, key_end) for vectors vs[0..n) (all of which have these keys).
template <class Rows>
void values_range(const Queries& qs, const int* vs, int n, int key_begin, int key_end, const Rows& fmt,
                  const uint16_t* v_base, const PagedKv& kv) {
  if (key_begin >= key_end) return;
  const int chunks = qs.head_dim / 8;
  for (int k0 = key_begin; k0 < key_end; k0 += kValueKeys) {
    const int k1 = std::min(key_end, k0 + kValueKeys);
    for (int i = 0; i < n; i += 3) {
      float* out[3];
      const float* p[3];
      const int qb = std::min(3, n - i);
      for (int q = 0; q < qb; ++q) {
        out[q] = qs.out(vs[i + q]);
        p[q] = qs.probs(vs[i + q], k0);
      }
      if (qb == 3) values_chunks<3>(out, p, chunks, k0, k1, fmt, v_base, kv);
      if (qb == 2) values_chunks<2>(out, p, chunks, k0, k1, fmt, v_base, kv);
      if (qb == 1) values_chunks<1>(out, p, chunks, k0, k1, fmt, v_base, kv);
    }
  }
}

// One row's attention for one KV head when head_dim is not a multiple of 8: key by key.
void attention_row_any_dim(const float* qg, const PagedKv& kv, int n_keys, int n_gqa, int head_dim, float scale,
                           float* og, float* scratch) {
  for_each_key(kv.k_base, kv, n_keys, head_dim, [&](int j, const uint16_t* k) {
    for (int h = 0; h < n_gqa; ++h) scratch[int64_t(h) * n_keys + j] = dot_f32_f16(qg + int64_t(h) * head_dim, k, head_dim) * scale;
  });
  for (int h = 0; h < n_gqa; ++h) softmax_avx2(scratch + int64_t(h) * n_keys, n_keys);
  for (int64_t i = 0; i < int64_t(n_gqa) * head_dim; ++i) og[i] = 0.f;
  for_each_key(kv.v_base, kv, n_keys, head_dim, [&](int j, const uint16_t* v) {
    for (int d = 0; d < head_dim; ++d) {
      const float vf = f16_to_f32(v[d]);
      for (int h = 0; h < n_gqa; ++h) og[int64_t(h) * head_dim + d] += scratch[int64_t(h) * n_keys + j] * vf;
    }
  });
}

// A block of rows over one KV head whose width is a multiple of 8, its rows read through `fmt`.
template <class Rows>
void attention_block(const AttentionRows& rows, const PagedKv& kv, const Rows& fmt, int n_gqa, int head_dim,
                     float scale, float* scratch) {
  const KeySpan span = key_span(rows);
  const Queries qs(rows, n_gqa, head_dim, span, scratch);
  scores_by_8(qs, fmt, kv.k_base, kv, span.end, scale);
  softmax_then_values(qs, span, softmax_avx2, [&](const int* vs, int n, int key_begin, int key_end) {
    values_range(qs, vs, n, key_begin, key_end, fmt, kv.v_base, kv);
  });
}

}  // namespace

// The rows of a prefill block and the heads of their GQA group share each key block's widening and
// each value chunk's conversion (BM_AttentionRowsPrefill); a decode row's values too take register tiles
// over kValueKeys keys at a time, not one pass with its outputs in memory, whose loads and stores of
// every output chunk for every key cost more than re-reading the rows from L1/L2
// (BM_AttentionStepQwen3Shape with INFER_NO_AVX512=1).
void attention_rows_avx2(const AttentionRows& rows, const PagedKv& kv, int n_gqa, int head_dim, float scale,
                         float* scratch) {
  if (head_dim % 8 != 0 && kv.type != KvType::F16) {  // ops.h's dispatch does not send these here
    for (int i = 0; i < rows.n_rows; ++i) {
      PagedKv row_kv = kv;
      row_kv.first_key = rows.key_begin[i];
      attention_row_ref(rows.q + i * rows.q_stride, row_kv, rows.key_end[i] - rows.key_begin[i], n_gqa, 1, head_dim,
                        scale, rows.out + i * rows.out_stride, scratch);
    }
    return;
  }
  if (head_dim % 8 != 0) {
    for (int i = 0; i < rows.n_rows; ++i) {
      PagedKv row_kv = kv;
      row_kv.first_key = rows.key_begin[i];
      attention_row_any_dim(rows.q + i * rows.q_stride, row_kv, rows.key_end[i] - rows.key_begin[i], n_gqa,
                            head_dim, scale, rows.out + i * rows.out_stride, scratch);
    }
    return;
  }
  switch (kv.type) {
    case KvType::Q8_0: return attention_block(rows, kv, BlockRows<KvType::Q8_0>{kv.head_elem}, n_gqa, head_dim, scale, scratch);
    case KvType::Q4_0: return attention_block(rows, kv, BlockRows<KvType::Q4_0>{kv.head_elem}, n_gqa, head_dim, scale, scratch);
    default: return attention_block(rows, kv, F16Rows{}, n_gqa, head_dim, scale, scratch);
  }
}

void q8_0_scores_avx2(const float* q, const PagedKv& head, int n_keys, int n_gqa, int head_dim, float scale,
                      float* scores) {
  const int begin = head.first_key, end = head.first_key + n_keys;
  for (int h = 0; h < n_gqa; ++h) {  // in order: each head's last block of 8 spills into the next's first keys
    const AttentionRows row{q + int64_t(h) * head_dim, 0, nullptr, 0, &begin, &end, 1};
    const KeySpan span = key_span(row);
    const Queries qs(row, 1, head_dim, span, scores + int64_t(h) * n_keys);
    if (head.type == KvType::Q4_0) {
      q8_scores_by_8<KvType::Q4_0>(qs, head, span.end, scale);
    } else {
      q8_scores_by_8<KvType::Q8_0>(qs, head, span.end, scale);
    }
  }
}

// One row is a block of one row, KV head by KV head.
void attention_row_avx2(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                        float scale, float* out, float* scratch) {
  const int n_gqa = n_head / n_kv_head;
  const int begin = kv.first_key, end = kv.first_key + n_keys;
  for (int g = 0; g < n_kv_head; ++g) {
    const int64_t at = int64_t(g) * n_gqa * head_dim;
    const PagedKv head_kv = kv_head(kv, int64_t(g) * head_dim);
    const AttentionRows row{q + at, 0, out + at, 0, &begin, &end, 1};
    attention_rows_avx2(row, head_kv, n_gqa, head_dim, scale, scratch);
  }
}

}  // namespace infer::kernels
