// How the paged KV cache stores a token's K (or V) row of kv_dim elements: F16, or the Q8_0 / Q4_0
// blocks of GGUF (spec quant-formats.md §4.5, §4.1), 32 elements a block along the row (a block may
// hold several narrow heads: stories260K's heads are 8 wide). Every row size is a whole number of
// 2-byte units, the unit PagedKv and the KV pool count in.
#pragma once
#include <cstdint>
#include <string>

namespace infer::kernels {

enum class KvType : uint8_t { F16, Q8_0, Q4_0 };

constexpr int kKvBlockElements = 32;  // Q8_0 and Q4_0

// "f16", "q8_0", "q4_0".
const char* kv_type_name(KvType t);
// Parses kv_type_name's names (case-insensitive); throws std::invalid_argument naming them otherwise.
KvType parse_kv_type(const std::string& name);
// Whether rows of kv_dim elements can be stored as `t` (Q8_0, Q4_0: kv_dim a multiple of 32).
bool kv_type_fits(KvType t, int kv_dim);
// 2-byte units of one block (Q8_0 17, Q4_0 9) or of one element (F16: 1).
constexpr int64_t kv_block_halves(KvType t) { return t == KvType::Q8_0 ? 17 : t == KvType::Q4_0 ? 9 : 1; }
// 2-byte units of one row of kv_dim elements (kv_type_fits must hold).
constexpr int64_t kv_row_halves(KvType t, int64_t kv_dim) {
  return t == KvType::F16 ? kv_dim : kv_dim / kKvBlockElements * kv_block_halves(t);
}

constexpr int kMaxLaneKeyBlocks = 8;  // heads up to 256 wide
// Whether a pool of `t` rows in heads of head_dim elements keeps its keys in lanes (key_lanes.h) and
// scores them by integer dots (q8_0_scores.h): Q8_0 and Q4_0 keys in heads of one to eight whole blocks.
constexpr bool keys_in_lanes(KvType t, int head_dim) {
  return (t == KvType::Q8_0 || t == KvType::Q4_0) && head_dim > 0 && head_dim % kKvBlockElements == 0 &&
         head_dim <= kMaxLaneKeyBlocks * kKvBlockElements;
}

}  // namespace infer::kernels
