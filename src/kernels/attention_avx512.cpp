// AVX-512 attention of one query row, for head_dim 64, 128 or 256: the AVX2 version's steps and key
// order, 16 lanes wide, with each head's output held in registers while the values stream past (the
// AVX2 version reloads and stores it for every key). attention_row() takes it for every row on
// AVX-512 machines (use_avx512()), so a row's arithmetic never depends on its batch (invariant 7).
// Like the *_avx512.cpp and *_amx.cpp kernel files, this file defines no weak symbols (no
// standard-library templates): see avx512_common.h.
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* operands): a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/key_rows.h"
#include "kernels/ops_avx2.h"
#include "kernels/ops_avx512.h"

namespace infer::kernels {

namespace {
inline int min_int(int a, int b) { return a < b ? a : b; }

inline __m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// How far ahead the passes prefetch (keys). A head's rows are a slice of rows kv_dim apart, which the
// hardware prefetchers do not follow (BM_AttentionStepQwen3Shape; docs/performance.md, Constants).
constexpr int kKeysAhead = 32, kValuesAhead = 16;

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
// keys kKeysAhead further on. Returns how many of the W are real keys.
template <int W>
int key_block(const uint16_t* k_base, const PagedKv& kv, int n_keys, int j0, int row_len, const uint16_t** rows) {
  const int m = min_int(W, n_keys - j0);
  for (int i = 0; i < W; ++i) rows[i] = key_row(k_base, kv, j0 + min_int(i, m - 1));
  for (int j = j0 + kKeysAhead; j < min_int(j0 + kKeysAhead + W, n_keys); ++j) prefetch_row(key_row(k_base, kv, j), row_len);
  return m;
}

// scores[h * n_keys + j] = (q_h · k_j) · scale for the n_gqa heads of one group, 16 keys at a time;
// the last group repeats its final key to fill the vector and keeps only the real lanes.
template <int NC>  // head_dim = 16 · NC
void scores_by_16(const float* qg, const uint16_t* k_base, const PagedKv& kv, int n_keys, int h_begin, int n_gqa,
                  float scale, float* scores) {
  const __m512 sv = _mm512_set1_ps(scale);
  for (int j = 0; j < min_int(kKeysAhead, n_keys); ++j) prefetch_row(key_row(k_base, kv, j), 16 * NC);
  for (int j0 = 0; j0 < n_keys; j0 += 16) {
    const uint16_t* rows[16];
    const int m = key_block<16>(k_base, kv, n_keys, j0, 16 * NC, rows);
    const auto mask = static_cast<__mmask16>((1u << m) - 1);
    for (int h = h_begin; h < n_gqa; ++h) {
      const float* q = qg + h * 16 * NC;
      __m512 a[16];
      for (auto& x : a) x = _mm512_setzero_ps();
      for (int c = 0; c < NC; ++c) {
        const __m512 qv = _mm512_loadu_ps(q + 16 * c);
        for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(qv, load_f16x16(rows[i] + 16 * c), a[i]);
      }
      _mm512_mask_storeu_ps(scores + static_cast<int64_t>(h) * n_keys + j0, mask, _mm512_mul_ps(sum16(a), sv));
    }
  }
}

// The same scores for heads h0 and h0 + 1, 8 keys at a time: each key's chunk is converted once for
// both heads (the conversion is two µops), sum16's lanes 0-7 are head h0's keys and 8-15 head
// h0 + 1's. Every (head, key) dot takes the same steps as in scores_by_16 (its chunks in order into
// its own accumulator, then the same tree), so the scores are bitwise the same.
template <int NC>
void scores_pair_by_8(const float* qg, const uint16_t* k_base, const PagedKv& kv, int n_keys, int h0, float scale,
                      float* scores) {
  const __m512 sv = _mm512_set1_ps(scale);
  const float* q0 = qg + h0 * 16 * NC;
  const float* q1 = q0 + 16 * NC;
  float* s0 = scores + static_cast<int64_t>(h0) * n_keys;
  float* s1 = s0 + n_keys;
  for (int j = 0; j < min_int(kKeysAhead, n_keys); ++j) prefetch_row(key_row(k_base, kv, j), 16 * NC);
  for (int j0 = 0; j0 < n_keys; j0 += 8) {
    const uint16_t* rows[8];
    const int m = key_block<8>(k_base, kv, n_keys, j0, 16 * NC, rows);
    __m512 a[16];
    for (auto& x : a) x = _mm512_setzero_ps();
    for (int c = 0; c < NC; ++c) {
      const __m512 qv0 = _mm512_loadu_ps(q0 + 16 * c), qv1 = _mm512_loadu_ps(q1 + 16 * c);
      for (int i = 0; i < 8; ++i) {
        const __m512 k = load_f16x16(rows[i] + 16 * c);
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
template <int NC, int HP>
void values_pass(const float* scores, int n_keys, const uint16_t* v_base, const PagedKv& kv, int h0, float* og) {
  __m512 acc[HP][NC];
  for (auto& head : acc) {
    for (auto& x : head) x = _mm512_setzero_ps();
  }
  for (int j = 0; j < n_keys; ++j) {
    if (j + kValuesAhead < n_keys) prefetch_row(key_row(v_base, kv, j + kValuesAhead), 16 * NC);
    const uint16_t* v = key_row(v_base, kv, j);
    __m512 p[HP];
    for (int hh = 0; hh < HP; ++hh) p[hh] = _mm512_set1_ps(scores[static_cast<int64_t>(h0 + hh) * n_keys + j]);
    for (int c = 0; c < NC; ++c) {
      const __m512 vv = load_f16x16(v + 16 * c);
      for (int hh = 0; hh < HP; ++hh) acc[hh][c] = _mm512_fmadd_ps(p[hh], vv, acc[hh][c]);
    }
  }
  for (int hh = 0; hh < HP; ++hh) {
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(og + (h0 + hh) * 16 * NC + 16 * c, acc[hh][c]);
  }
}

template <int NC>
void attention_nc(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, float scale, float* out,
                  float* scratch) {
  constexpr int kHeadDim = 16 * NC, kHeadsPerPass = 16 / NC;  // 16 accumulators
  const int n_gqa = n_head / n_kv_head;
  for (int g = 0; g < n_kv_head; ++g) {
    const int64_t head_off = static_cast<int64_t>(g) * kHeadDim;
    const float* qg = q + static_cast<int64_t>(g) * n_gqa * kHeadDim;
    float* og = out + static_cast<int64_t>(g) * n_gqa * kHeadDim;
    int paired = 0;
    for (; paired + 2 <= n_gqa; paired += 2) scores_pair_by_8<NC>(qg, kv.k_base + head_off, kv, n_keys, paired, scale, scratch);
    if (paired < n_gqa) scores_by_16<NC>(qg, kv.k_base + head_off, kv, n_keys, paired, n_gqa, scale, scratch);
    for (int j = 0; j < min_int(kValuesAhead, n_keys); ++j) prefetch_row(key_row(kv.v_base + head_off, kv, j), kHeadDim);
    for (int h = 0; h < n_gqa; ++h) softmax_avx2(scratch + static_cast<int64_t>(h) * n_keys, n_keys);
    int h0 = 0;
    for (; h0 + kHeadsPerPass <= n_gqa; h0 += kHeadsPerPass) {
      values_pass<NC, kHeadsPerPass>(scratch, n_keys, kv.v_base + head_off, kv, h0, og);
    }
    for (; h0 < n_gqa; ++h0) values_pass<NC, 1>(scratch, n_keys, kv.v_base + head_off, kv, h0, og);
  }
}
}  // namespace

bool attention_avx512_supports(int head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

void attention_row_avx512(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                          float scale, float* out, float* scratch) {
  switch (head_dim) {
    case 64: return attention_nc<4>(q, kv, n_keys, n_head, n_kv_head, scale, out, scratch);
    case 128: return attention_nc<8>(q, kv, n_keys, n_head, n_kv_head, scale, out, scratch);
    default: return attention_nc<16>(q, kv, n_keys, n_head, n_kv_head, scale, out, scratch);
  }
}

}  // namespace infer::kernels
