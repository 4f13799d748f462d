// Scores over keys in lanes (Q8_0 or Q4_0, key_lanes.h) by integer dot products, as llama.cpp scores
// quantised keys: each query head is quantised to Q8_0 blocks of 32 (its own f32 scale a block), and
// key k's score is
//   Σ_b  float(Σ_i qcode_bi · kcode_bi) · (dq_b · dk_b)      (blocks b in order, then · scale)
// with kcode the key's Q8_0 code or its Q4_0 nibble − 8. The inner sums are exact integers, so every
// kernel (scalar, AVX2, AVX-512; a row alone or in a block) gives q8_0_key_score_ref's bits whatever
// order it adds the products in: a score costs a few integer instructions per 32 elements instead of
// widening each key to f32 (BM_AttentionStepQwen3Shape).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/ops/key_lanes.h"
#include "kernels/ops/kv_type.h"
#include "kernels/quant/quant.h"

namespace infer::kernels {
// Internal linkage: files compiled for different instruction sets include this (see avx512_common.h).
namespace {

constexpr int kMaxQ8QueryBlocks = kMaxLaneKeyBlocks;

// One query head as Q8_0 blocks: codes round(q · 127 / amax) in [-127, 127], scale amax / 127.
struct Q8Query {
  alignas(64) int8_t codes[kMaxQ8QueryBlocks * kKvBlockElements];
  float d[kMaxQ8QueryBlocks];
  int n_blocks;
};

// The scale and the multiplier of one block whose largest magnitude is amax (shared by every
// kernel's quantiser, so all round the same values).
inline float q8_query_scale(float amax) { return amax / 127.f; }
inline float q8_query_multiplier(float amax) { return amax > 0.f ? 127.f / amax : 0.f; }

inline void quantise_query_ref(const float* q, int head_dim, Q8Query& out) {
  out.n_blocks = head_dim / kKvBlockElements;
  for (int b = 0; b < out.n_blocks; ++b) {
    const float* x = q + b * kKvBlockElements;
    float amax = 0.f;
    for (int i = 0; i < kKvBlockElements; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    out.d[b] = q8_query_scale(amax);
    const float m = q8_query_multiplier(amax);
    for (int i = 0; i < kKvBlockElements; ++i) {
      out.codes[b * kKvBlockElements + i] = static_cast<int8_t>(std::lrint(x[i] * m));  // ties to even, as cvtps
    }
  }
}

// The score of key `key` (an absolute key number) before the attention scale.
inline float q8_0_key_score_ref(const Q8Query& q, const KeyLanes& keys, int key) {
  const uint8_t* chunk = keys.chunk(key / keys.page_tokens);
  const int t = key % keys.page_tokens;
  float acc = 0.f;
  for (int b = 0; b < q.n_blocks; ++b) {
    int32_t sum = 0;
    for (int i = 0; i < kKvBlockElements; ++i) sum += int32_t(q.codes[b * kKvBlockElements + i]) * keys.code(chunk, b, t, i);
    const float term = static_cast<float>(sum) * (q.d[b] * f16_to_f32(keys.scales(chunk, b)[t]));
    acc = b == 0 ? term : acc + term;
  }
  return acc;
}

}  // namespace
}  // namespace infer::kernels
