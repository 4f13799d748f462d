// Key j's row in a paged K or V, for the attention kernels. With pages of a power-of-two size (the
// engine's 16) the page and row come from a shift and a mask, not a division by page_tokens per key
// (BM_AttentionRowQwen3Shape; docs/performance.md, "Constants"); keys in lanes (key_lanes.h) find
// their pages the same way.
#pragma once
#include <cstdint>

#include "kernels/ops/ops.h"

namespace infer::kernels {
// Internal linkage: files compiled for different instruction sets include this (see avx512_common.h).
namespace {

// Key `key`'s page (its page-table index) and row in that page.
[[gnu::always_inline]] inline void page_and_row(int key, int page_tokens, int& page, int& row) {
  const auto tokens = static_cast<unsigned>(page_tokens), k = static_cast<unsigned>(key);
  if ((tokens & (tokens - 1)) == 0) {
    page = int(k >> __builtin_ctz(tokens));
    row = int(k & (tokens - 1));
  } else {
    page = int(k / tokens);
    row = int(k % tokens);
  }
}

// Row of key kv.first_key + j (its `base`-relative slice: base is kv.k_base or kv.v_base plus the head's offset).
// Always inlined: GCC 12 left some calls out of line in the per-key loops (perf, BM_AttentionStepQwen3Shape).
[[gnu::always_inline]] inline const uint16_t* key_row(const uint16_t* base, const PagedKv& kv, int j) {
  int page, row;
  page_and_row(j + kv.first_key, kv.page_tokens, page, row);
  return base + static_cast<int64_t>(kv.page_table[page]) * kv.page_stride + static_cast<int64_t>(row) * kv.row_stride;
}

}  // namespace
}  // namespace infer::kernels
