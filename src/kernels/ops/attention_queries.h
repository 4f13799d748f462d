// The query vectors of a block of attention rows (ops.h, AttentionRows) over one KV head, and the keys
// they read, for the AVX2 and AVX-512 block kernels.
#pragma once
#include <cstdint>

#include "kernels/ops/ops.h"

namespace infer::kernels {
// Internal linkage: files compiled for different instruction sets include this (see avx512_common.h).
namespace {

// The keys a block's rows read: every row's keys lie in [begin, end); every row reads
// [common_begin, common_end) (empty when common_begin >= common_end).
struct KeySpan {
  int begin, end, common_begin, common_end;
};

inline KeySpan key_span(const AttentionRows& rows) {
  KeySpan s{rows.key_begin[0], rows.key_end[0], rows.key_begin[0], rows.key_end[0]};
  for (int i = 1; i < rows.n_rows; ++i) {
    const int b = rows.key_begin[i], e = rows.key_end[i];
    if (b < s.begin) s.begin = b;
    if (e > s.end) s.end = e;
    if (b > s.common_begin) s.common_begin = b;
    if (e < s.common_end) s.common_end = e;
  }
  return s;
}

// Vector v is row v / n_gqa's head v % n_gqa. Its scores (then probabilities) are row v of `scores`,
// indexed by key - span_begin; rows are the span rounded up to 8 apart (attention_rows_scratch).
struct Queries {
  const AttentionRows& rows;
  int n_gqa, head_dim;
  int span_begin;
  float* scores;
  int64_t score_stride;

  Queries(const AttentionRows& r, int gqa, int hd, const KeySpan& span, float* scratch)
      : rows(r), n_gqa(gqa), head_dim(hd), span_begin(span.begin), scores(scratch),
        score_stride((int64_t(span.end) - span.begin + 7) / 8 * 8) {}

  int count() const { return rows.n_rows * n_gqa; }
  const float* q(int v) const { return rows.q + (v / n_gqa) * rows.q_stride + int64_t(v % n_gqa) * head_dim; }
  float* out(int v) const { return rows.out + (v / n_gqa) * rows.out_stride + int64_t(v % n_gqa) * head_dim; }
  int begin(int v) const { return rows.key_begin[v / n_gqa]; }
  int end(int v) const { return rows.key_end[v / n_gqa]; }
  float* probs(int v, int key) const { return scores + v * score_stride + (key - span_begin); }
};

// After the scores: each vector's softmax over its own keys and its output zeroed, then its values
// added in key order: the keys before the rows' common ones alone, the common keys together with the
// other vectors (their value rows loaded once for all), then those after alone. The kernel's
// softmax(probs, n) and values_range(vectors, n, key_begin, key_end) do the work.
template <class Softmax, class ValuesRange>
void softmax_then_values(const Queries& qs, const KeySpan& span, Softmax&& softmax, ValuesRange&& values_range) {
  constexpr int kMaxShared = 64;
  int all[kMaxShared];
  const int n_vec = qs.count();
  for (int v = 0; v < n_vec; ++v) {
    softmax(qs.probs(v, qs.begin(v)), qs.end(v) - qs.begin(v));
    float* o = qs.out(v);
    for (int d = 0; d < qs.head_dim; ++d) o[d] = 0.f;
    if (v < kMaxShared) all[v] = v;
  }
  if (span.common_begin < span.common_end && n_vec <= kMaxShared) {
    for (int v = 0; v < n_vec; ++v) values_range(&v, 1, qs.begin(v), span.common_begin);
    values_range(all, n_vec, span.common_begin, span.common_end);
    for (int v = 0; v < n_vec; ++v) values_range(&v, 1, span.common_end, qs.end(v));
  } else {
    for (int v = 0; v < n_vec; ++v) values_range(&v, 1, qs.begin(v), qs.end(v));
  }
}

}  // namespace
}  // namespace infer::kernels
