// Attention of one query row over a sequence's paged keys/values (spec §3.5):
// scores = (q_h · k_j) · scale, softmax, out_h = Σ_j p_j · v_j, keys always taken in order from kv.first_key.
// Q8_0 and Q4_0 elements are code · d in f32, which is exact (an 8-bit code times an 11-bit
// significand), so every kernel reads the same values from a row whatever it dequantises with. Q8_0
// and Q4_0 keys in heads of whole blocks are scored by integer dots instead (q8_0_scores.h).
#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/ops.h"
#include "kernels/ops/q8_0_scores.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx512/ops_avx512.h"
#include "kernels/quant/quant.h"

namespace infer::kernels {

float kv_element(const uint16_t* head, KvType type, int head_elem, int d) {
  if (type == KvType::F16) return f16_to_f32(head[d]);
  const int e = head_elem + d;
  const uint16_t* block = head + int64_t(e / kKvBlockElements) * kv_block_halves(type);
  const float scale = f16_to_f32(block[0]);
  const auto* codes = reinterpret_cast<const uint8_t*>(block + 1);
  const int i = e % kKvBlockElements;
  if (type == KvType::Q8_0) return static_cast<float>(static_cast<int8_t>(codes[i])) * scale;
  const int code = i < 16 ? codes[i] & 0x0F : codes[i - 16] >> 4;
  return static_cast<float>(code - 8) * scale;
}

namespace {
const uint16_t* ref_row(const PagedKv& head, const uint16_t* base, int j) {
  const int key = head.first_key + j;
  return base + int64_t(head.page_table[key / head.page_tokens]) * head.page_stride +
         int64_t(key % head.page_tokens) * head.row_stride;
}
}  // namespace

void q8_0_scores_ref(const float* q, const PagedKv& head, int n_keys, int n_gqa, int head_dim, float scale,
                     float* scores) {
  const KeyLanes keys(head, head_dim);
  for (int h = 0; h < n_gqa; ++h) {
    Q8Query qq;
    quantise_query_ref(q + int64_t(h) * head_dim, head_dim, qq);
    for (int j = 0; j < n_keys; ++j) scores[int64_t(h) * n_keys + j] = q8_0_key_score_ref(qq, keys, head.first_key + j) * scale;
  }
}

void attention_row_ref(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                       float scale, float* out, float* scratch) {
  const int n_gqa = n_head / n_kv_head;
  for (int h = 0; h < n_head; ++h) {
    const PagedKv head = kv_head(kv, int64_t(h / n_gqa) * head_dim);
    const float* qh = q + static_cast<int64_t>(h) * head_dim;
    if (keys_in_lanes(head.type, head_dim)) {
      q8_0_scores_ref(qh, head, n_keys, 1, head_dim, scale, scratch);
    } else {
      for (int j = 0; j < n_keys; ++j) {
        const uint16_t* k = ref_row(head, head.k_base, j);
        double dot = 0.0;
        for (int d = 0; d < head_dim; ++d) dot += static_cast<double>(qh[d]) * kv_element(k, head.type, head.head_elem, d);
        scratch[j] = static_cast<float>(dot) * scale;
      }
    }
    softmax_ref(scratch, n_keys);
    float* oh = out + static_cast<int64_t>(h) * head_dim;
    for (int d = 0; d < head_dim; ++d) oh[d] = 0.f;
    for (int j = 0; j < n_keys; ++j) {
      const uint16_t* v = ref_row(head, head.v_base, j);
      const float p = scratch[j];
      for (int d = 0; d < head_dim; ++d) oh[d] += p * kv_element(v, head.type, head.head_elem, d);
    }
  }
}

void attention_row(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                   float scale, float* out, float* scratch) {
  if (use_avx512() && attention_avx512_supports(head_dim) && kv.head_elem == 0) {
    attention_row_avx512(q, kv, n_keys, n_head, n_kv_head, head_dim, scale, out, scratch);
  } else if (use_avx2()) {
    attention_row_avx2(q, kv, n_keys, n_head, n_kv_head, head_dim, scale, out, scratch);
  } else {
    attention_row_ref(q, kv, n_keys, n_head, n_kv_head, head_dim, scale, out, scratch);
  }
}

int64_t attention_rows_scratch(int n_rows, int n_gqa, int key_span) {
  return int64_t(n_rows) * n_gqa * ((int64_t(key_span) + 7) / 8 * 8);
}

void attention_rows(const AttentionRows& rows, const PagedKv& kv, int n_gqa, int head_dim, float scale,
                    float* scratch) {
  if (use_avx512() && attention_avx512_supports(head_dim) && kv.head_elem == 0) {
    attention_rows_avx512(rows, kv, n_gqa, head_dim, scale, scratch);
    return;
  }
  if (use_avx2()) {
    attention_rows_avx2(rows, kv, n_gqa, head_dim, scale, scratch);
    return;
  }
  for (int i = 0; i < rows.n_rows; ++i) {
    PagedKv row_kv = kv;
    row_kv.first_key = rows.key_begin[i];
    attention_row(rows.q + i * rows.q_stride, row_kv, rows.key_end[i] - rows.key_begin[i], n_gqa, 1, head_dim, scale,
                  rows.out + i * rows.out_stride, scratch);
  }
}

}  // namespace infer::kernels
