// Q8_0 and Q4_0 keys in heads of whole blocks (keys_in_lanes) are kept in lanes. In each page, the T
// keys of one KV head are one chunk: first the f16 scales of its blocks (block b's, token after token),
// then the code bytes of its blocks four at a time, token after token: byte 4·(g·T + t) + i of block
// b's T·(code bytes) holds byte 4g + i of token t's block (Q8_0: code 4g + i; Q4_0: codes 4g + i in its
// low nibble and 4g + i + 16 in its high one, as GGUF packs them). Four bytes of 16 consecutive keys
// are one 64-byte load, so the kernels score 16 keys (AVX-512; AVX2 8) in the lanes of one register,
// each lane summing its own key's products with no sums across lanes (BM_AttentionStepQwen3Shape).
// Scales and codes are one chunk to prefetch: scales kept apart from the codes stalled every group of
// keys in the same benchmark. A page's K region keeps its size (T rows of GGUF's blocks), so paging,
// memory planning and copies of whole pages are as for rows; values stay rows.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/ops/key_rows.h"
#include "kernels/ops/kv_type.h"
#include "kernels/ops/ops.h"

namespace infer::kernels {
// Internal linkage: files compiled for different instruction sets include this (see avx512_common.h).
namespace {

// A token's block in lanes: its scale and its code bytes (Q8_0 32, Q4_0 16).
constexpr int64_t lane_block_bytes(KvType t) { return 2 * kv_block_halves(t); }
constexpr int64_t lane_code_bytes(KvType t) { return lane_block_bytes(t) - 2; }
// How far ahead the kernels prefetch keys in lanes into L2, a page's chunk at a time (64 to 256 alike
// on AVX-512, 128 slower than 64 on AVX2: BM_AttentionStepQwen3Shape from memory, Zen 5).
constexpr int kLaneKeysAhead = 64;

// Where one KV head's keys in lanes are (a kv_head view of a keys_in_lanes pool, heads of head_dim).
struct KeyLanes {
  const uint8_t* layer;  // page 0's K region of this layer, at the head's chunk
  int64_t page_bytes, scale_bytes, chunk_bytes;  // scale_bytes: the head's scales, where its codes start
  const int32_t* page_table;
  int page_tokens, first_key;
  int groups;  // groups of 4 code bytes in a block: Q8_0 8, Q4_0 4

  KeyLanes(const PagedKv& head, int head_dim)
      : layer(reinterpret_cast<const uint8_t*>(head.k_base - head.key_block * kv_block_halves(head.type)) +
              head.key_block * lane_block_bytes(head.type) * head.page_tokens),  // the chunks before: whole heads' blocks
        page_bytes(head.page_stride * 2),
        scale_bytes(int64_t(head_dim / kKvBlockElements) * 2 * head.page_tokens),
        chunk_bytes(int64_t(head_dim / kKvBlockElements) * lane_block_bytes(head.type) * head.page_tokens),
        page_table(head.page_table),
        page_tokens(head.page_tokens),
        first_key(head.first_key),
        groups(int(lane_code_bytes(head.type) / 4)) {}

  // Key `key`'s page (its page-table index) and token in that page.
  [[gnu::always_inline]] void locate(int key, int& page, int& t) const { page_and_row(key, page_tokens, page, t); }
  // The head's chunk in the page that holds page_table entry `page`.
  const uint8_t* chunk(int page) const { return layer + int64_t(page_table[page]) * page_bytes; }
  // Group g (code bytes 4g..4g+3) of the head's block b in `chunk`: token t's 4 bytes at + 4t.
  const uint8_t* codes(const uint8_t* chunk, int b, int g) const {
    return chunk + scale_bytes + (int64_t(b) * groups + g) * 4 * page_tokens;
  }
  // Element i (0..31) of the head's block b of token t in `chunk`, as the integer its scale multiplies
  // (Q8_0: the code; Q4_0: the nibble − 8).
  int code(const uint8_t* chunk, int b, int t, int i) const {
    if (groups == 8) return static_cast<int8_t>(codes(chunk, b, i / 4)[4 * t + i % 4]);
    const int j = i % 16;
    const uint8_t byte = codes(chunk, b, j / 4)[4 * t + j % 4];
    return (i < 16 ? byte & 0x0F : byte >> 4) - 8;
  }
  // The f16 scales of the head's block b in `chunk`, token t's at [t].
  const uint16_t* scales(const uint8_t* chunk, int b) const {
    return reinterpret_cast<const uint16_t*>(chunk) + int64_t(b) * page_tokens;
  }
};

// Writes a key row given as GGUF blocks of `type` (n_row_blocks of them, heads of head_blocks) as token
// t of a page's K region.
inline void store_key_lanes(KvType type, const uint16_t* blocks, int n_row_blocks, int head_blocks, uint16_t* region,
                            int page_tokens, int t) {
  const int64_t code_bytes = lane_code_bytes(type);
  for (int b = 0; b < n_row_blocks; ++b) {
    const uint16_t* block = blocks + int64_t(b) * kv_block_halves(type);
    const int head = b / head_blocks, hb = b % head_blocks;
    auto* chunk = reinterpret_cast<uint8_t*>(region) + int64_t(head) * head_blocks * lane_block_bytes(type) * page_tokens;
    reinterpret_cast<uint16_t*>(chunk)[int64_t(hb) * page_tokens + t] = block[0];
    uint8_t* codes = chunk + int64_t(head_blocks) * 2 * page_tokens + int64_t(hb) * code_bytes * page_tokens;
    for (int g = 0; g < code_bytes / 4; ++g) {
      std::memcpy(codes + int64_t(g) * 4 * page_tokens + 4 * t, reinterpret_cast<const uint8_t*>(block + 1) + 4 * g, 4);
    }
  }
}

}  // namespace
}  // namespace infer::kernels
