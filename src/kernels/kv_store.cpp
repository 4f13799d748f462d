// Writes one token's K and V rows into its page (F32 → F16, round to nearest even).
#include "kernels/cpu_features.h"
#include "kernels/ops.h"
#include "kernels/ops_avx2.h"
#include "kernels/quant.h"

namespace infer::kernels {

void kv_store_ref(const float* k, const float* v, uint16_t* k_base, uint16_t* v_base, int64_t page_stride,
                  int page_tokens, const int32_t* page_table, int kv_dim, int pos) {
  const int64_t at = static_cast<int64_t>(page_table[pos / page_tokens]) * page_stride +
                     static_cast<int64_t>(pos % page_tokens) * kv_dim;
  for (int i = 0; i < kv_dim; ++i) {
    k_base[at + i] = f32_to_f16(k[i]);
    v_base[at + i] = f32_to_f16(v[i]);
  }
}

void kv_store(const float* k, const float* v, uint16_t* k_base, uint16_t* v_base, int64_t page_stride,
              int page_tokens, const int32_t* page_table, int kv_dim, int pos) {
  if (use_avx2()) {
    kv_store_avx2(k, v, k_base, v_base, page_stride, page_tokens, page_table, kv_dim, pos);
  } else {
    kv_store_ref(k, v, k_base, v_base, page_stride, page_tokens, page_table, kv_dim, pos);
  }
}

}  // namespace infer::kernels
