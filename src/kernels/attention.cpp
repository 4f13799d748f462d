// Attention of one query row over a sequence's paged F16 keys/values (spec §3.5):
// scores = (q_h · k_j) · scale, softmax, out_h = Σ_j p_j · v_j, keys always taken in order from kv.first_key.
#include "kernels/cpu_features.h"
#include "kernels/ops.h"
#include "kernels/ops_avx2.h"
#include "kernels/ops_avx512.h"
#include "kernels/quant.h"

namespace infer::kernels {

void attention_row_ref(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                       float scale, float* out, float* scratch) {
  const int n_gqa = n_head / n_kv_head;
  for (int h = 0; h < n_head; ++h) {
    const int kvh = h / n_gqa;
    const float* qh = q + static_cast<int64_t>(h) * head_dim;
    for (int j = 0; j < n_keys; ++j) {
      const int key = kv.first_key + j;
      const int64_t page = kv.page_table[key / kv.page_tokens];
      const uint16_t* k = kv.k_base + page * kv.page_stride +
                          static_cast<int64_t>(key % kv.page_tokens) * kv.kv_dim + static_cast<int64_t>(kvh) * head_dim;
      double dot = 0.0;
      for (int d = 0; d < head_dim; ++d) dot += static_cast<double>(qh[d]) * f16_to_f32(k[d]);
      scratch[j] = static_cast<float>(dot) * scale;
    }
    softmax_ref(scratch, n_keys);
    float* oh = out + static_cast<int64_t>(h) * head_dim;
    for (int d = 0; d < head_dim; ++d) oh[d] = 0.f;
    for (int j = 0; j < n_keys; ++j) {
      const int key = kv.first_key + j;
      const int64_t page = kv.page_table[key / kv.page_tokens];
      const uint16_t* v = kv.v_base + page * kv.page_stride +
                          static_cast<int64_t>(key % kv.page_tokens) * kv.kv_dim + static_cast<int64_t>(kvh) * head_dim;
      const float p = scratch[j];
      for (int d = 0; d < head_dim; ++d) oh[d] += p * f16_to_f32(v[d]);
    }
  }
}

void attention_row(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                   float scale, float* out, float* scratch) {
  if (use_avx512() && attention_avx512_supports(head_dim)) {
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
  if (use_avx512() && attention_avx512_supports(head_dim)) {
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
