// Element-wise and attention kernels of the forward pass. Each has a scalar reference (`*_ref`) and an
// optimised version chosen at run time; tests hold the pairs together. Units: counts of floats.
#pragma once
#include <cstdint>

#include "kernels/ops/kv_type.h"

namespace infer::kernels {

// out[i] = x[i] / sqrt(mean(x²) + eps) * w[i]   (w may be null: no weight). The sum of squares is
// accumulated in double (spec §3.2). x and out may be the same buffer.
void rmsnorm(const float* x, const float* w, float* out, int64_t n, float eps);
void rmsnorm_ref(const float* x, const float* w, float* out, int64_t n, float eps);

// Rotary position embedding of one head vector in place. `n_rot` leading dims are rotated
// (n_rot <= head_dim). neox=false pairs (2i, 2i+1) ("NORM" mode, llama); neox=true pairs (i, i+n_rot/2)
// (qwen2/qwen3). theta_i = pos * freq_scale * base^(-2i/n_rot) / freq_factors[i] (spec §3.4.1: the
// powers are formed by repeated f32 multiplication, as llama.cpp does). freq_factors: n_rot/2 divisors
// (llama3 `rope_freqs.weight`, LongRoPE's long or short factors), or null for none. The rotation's
// magnitude is mscale: cos and sin are both multiplied by it (rope.scaling.attn_factor; 1 leaves the
// angles' bits unchanged).
struct RopeParams {
  int n_rot;
  float freq_base;
  float freq_scale;
  bool neox;
  const float* freq_factors = nullptr;
  float mscale = 1.f;
};
// rope/rope_ref: n_rot <= 1024 (throws std::invalid_argument otherwise).
void rope(float* head, int head_dim, int pos, const RopeParams& p);
void rope_ref(float* head, int head_dim, int pos, const RopeParams& p);
// The same split in two, so that a row's angles are computed once for all its heads:
// rope_angles writes the n_rot/2 cosines and sines at `pos`; rope_apply rotates one head with them.
// rope(h, hd, pos, p) == rope_angles(pos, p, c, s) then rope_apply(h, c, s, p), bit for bit.
void rope_angles(int pos, const RopeParams& p, float* cos_out, float* sin_out);
void rope_apply(float* head, const float* cos, const float* sin, const RopeParams& p);
void rope_apply_ref(float* head, const float* cos, const float* sin, const RopeParams& p);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void swiglu_ref(const float* gate, const float* up, float* out, int64_t n);

// GELU, tanh approximation, through an f16 table as llama.cpp's CPU backend computes it (spec
// architectures-more.md §0.3): x <= -10 gives 0, x >= 10 gives x, else the table entry of f16(x).
// out may be x. geglu: out[i] = gelu(gate[i]) · up[i] (gemma3's feed-forward).
void gelu(const float* x, float* out, int64_t n);
void geglu(const float* gate, const float* up, float* out, int64_t n);
void gelu_ref(const float* x, float* out, int64_t n);
void geglu_ref(const float* gate, const float* up, float* out, int64_t n);
// The value gelu's table holds for f16 input bits h, as f16 bits (tests).
uint16_t gelu_table_entry(uint16_t h);

// LayerNorm (bert): y = (x - mean) / sqrt(var + eps) · w + b, mean and population variance summed in
// double. w and b may be null. x and out may be the same buffer.
void layernorm(const float* x, const float* w, const float* b, float* out, int64_t n, float eps);

// In-place softmax over n values: subtract the max, exp, sum in double, scale by the f32 reciprocal.
void softmax(float* x, int64_t n);
void softmax_ref(float* x, int64_t n);

// Keys/values of one sequence and one layer, read through its page table. The KV pool stores rows of
// kv_dim = n_kv_head * head_dim elements as `type` (kv_type.h); token t lives in page
// page_table[t / page_tokens] at row t % page_tokens. Page p's K rows start at k_base + p * page_stride
// (likewise V with v_base), rows row_stride apart; all three count 2-byte units (F16: elements).
// A view of one KV head (kv_head) points at the head's first element (F16) or at the block holding it,
// head_elem elements into that block (Q8_0, Q4_0: non-zero only for heads narrower than a block).
// Q8_0 and Q4_0 keys in heads of whole blocks are not rows but lanes (keys_in_lanes; key_lanes.h):
// their pages are found from k_base less key_block blocks.
struct PagedKv {
  const uint16_t* k_base;
  const uint16_t* v_base;
  int64_t page_stride;  // 2-byte units between two pages' K (or V) rows
  int page_tokens;
  const int32_t* page_table;
  int64_t row_stride;  // 2-byte units between two tokens' rows: kv_row_halves(type, kv_dim)
  int first_key = 0;  // attention reads keys first_key, first_key+1, ... (a sliding window skips older ones)
  KvType type = KvType::F16;
  int head_elem = 0;
  int key_block = 0;  // blocks kv_head moved k_base on by (Q8_0, Q4_0)
};

// The view of the head whose elements start at element `first` of each row (first = g · head_dim).
// Always inlined: the per-instruction-set kernel files must define no weak symbols (avx512_common.h).
[[gnu::always_inline]] inline PagedKv kv_head(PagedKv kv, int64_t first) {
  const int64_t at = kv.head_elem + first;
  const int64_t block = kv.type == KvType::F16 ? 1 : kKvBlockElements;
  kv.k_base += at / block * kv_block_halves(kv.type);
  kv.v_base += at / block * kv_block_halves(kv.type);
  if (kv.type != KvType::F16) kv.key_block += int(at / block);
  kv.head_elem = int(at % block);
  return kv;
}

// Element d of a head's slice of one row (`head`: the row's start plus kv_head's offset, as f32;
// head_elem: PagedKv::head_elem): the reference reader the optimised kernels agree with bit for bit.
float kv_element(const uint16_t* head, KvType type, int head_elem, int d);

// Attention of one query row (all n_head heads, q is n_head*head_dim floats, already roped)
// over the n_keys keys kv.first_key .. kv.first_key+n_keys-1 of `kv` (which keys are visible, causal or
// not, windowed or not, is the caller's choice). GQA: head h uses KV head h / (n_head / n_kv_head).
// out is n_head*head_dim floats. `scratch` holds attention_rows_scratch(1, n_head / n_kv_head, n_keys) floats.
// The reduction order over keys is fixed (first_key first), independent of how the row was batched.
void attention_row(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head, int head_dim,
                   float scale, float* out, float* scratch);
void attention_row_ref(const float* q, const PagedKv& kv, int n_keys, int n_head, int n_kv_head,
                       int head_dim, float scale, float* out, float* scratch);
// Keys in lanes (Q8_0 and Q4_0 keys in heads of whole blocks; q8_0_scores.h) are scored by integer dot
// products with the query quantised to Q8_0: scores[h · n_keys + j] = score(q_h, key first_key + j) · scale for the
// n_gqa query heads of one KV head (`head`, a kv_head view); every kernel gives these bits.
void q8_0_scores_ref(const float* q, const PagedKv& head, int n_keys, int n_gqa, int head_dim, float scale,
                     float* scores);

// A block of query rows of one sequence, for one KV head: row i's n_gqa query heads at q + i·q_stride
// (head h at + h·head_dim), its outputs likewise at out + i·out_stride, its keys
// key_begin[i] .. key_end[i]-1 (absolute key numbers; each range non-empty).
struct AttentionRows {
  const float* q;
  int64_t q_stride;
  float* out;
  int64_t out_stride;
  const int* key_begin;
  const int* key_end;
  int n_rows;
};

// Floats of scratch attention_rows needs for n_rows rows whose key ranges span `key_span` keys in all.
int64_t attention_rows_scratch(int n_rows, int n_gqa, int key_span);

// Attention of every row of `rows` over the KV head whose slices start at kv.k_base / kv.v_base
// (kv.first_key is not read). Each row's result is bitwise the attention_row of that row alone:
// rows are batched only to share the keys' and values' loads and conversions (invariant 7).
void attention_rows(const AttentionRows& rows, const PagedKv& kv, int n_gqa, int head_dim, float scale,
                    float* scratch);

// Stores one K and V row of kv_dim elements (heads of head_dim) for token `pos` through the page table,
// in rows of `type` row_stride apart (PagedKv's units), keys in lanes where keys_in_lanes(type,
// head_dim) (key_lanes.h): F16 rounds to nearest even (the optimised and reference versions give
// identical bits); Q8_0 and Q4_0 are GGUF's reference quantisers (quantize_row), run once per token.
void kv_store(const float* k, const float* v, KvType type, uint16_t* k_base, uint16_t* v_base, int64_t page_stride,
              int64_t row_stride, int page_tokens, const int32_t* page_table, int kv_dim, int head_dim, int pos);
void kv_store_ref(const float* k, const float* v, KvType type, uint16_t* k_base, uint16_t* v_base,
                  int64_t page_stride, int64_t row_stride, int page_tokens, const int32_t* page_table, int kv_dim,
                  int head_dim, int pos);

}  // namespace infer::kernels
