// Storage for the paged KV cache: one pool of fixed-size pages shared by all sequences, its rows of
// kv_dim elements stored as the pool's KvType (F16, or Q8_0 / Q4_0 blocks: kernels/ops/kv_type.h), R =
// kv_row_halves(type, kv_dim) 2-byte units a row (F16: kv_dim; Q8_0: kv_dim/32 · 17; Q4_0: kv_dim/32 · 9).
// Layout, in 2-byte units: page p, layer l holds K rows then V rows, each page_tokens × R:
//   k(p, l) = base + p * page_stride + (l * 2 + 0) * page_tokens * R
//   v(p, l) = k(p, l) + page_tokens * R
// Q8_0 and Q4_0 keys in heads of whole blocks fill their K region in lanes instead of rows (kernels/ops/key_lanes.h).
// page_stride = n_layer * 2 * page_tokens * R + kPagePadHalves. The pad (5 cache lines) keeps
// pages off the same cache sets: a page's size is usually a multiple of 256 KiB, so without it the
// same layer's rows of every page map to the same L1/L2 sets, and a long prompt's attention, which
// reads them all per query row, thrashes (a 2,050-token prefill; docs/performance.md, Constants).
// This class only stores; which page belongs to whom (allocation, reference counts, prefix sharing) is
// the engine's job. Memory is allocated and touched once at construction and never grows.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/ops/ops.h"
#include "model/hparams.h"

namespace infer::model {

class KvPool {
 public:
  // Throws std::runtime_error with the byte count when the pool cannot be allocated, and
  // std::invalid_argument when the model's rows cannot be stored as `type` (kv_type_fits).
  KvPool(const HParams& hp, int page_tokens, int n_pages, kernels::KvType type = kernels::KvType::F16);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  int page_tokens() const { return page_tokens_; }
  int n_pages() const { return n_pages_; }
  uint64_t bytes() const { return bytes_; }
  kernels::KvType type() const { return type_; }
  static uint64_t bytes_for(const HParams& hp, int page_tokens, int n_pages, kernels::KvType type = kernels::KvType::F16);
  static int64_t page_stride_for(const HParams& hp, int page_tokens, kernels::KvType type = kernels::KvType::F16);
  // Bytes one token's K and V rows take in all layers (the pages' pad not counted).
  static uint64_t bytes_per_token(const HParams& hp, kernels::KvType type);
  // Throws std::invalid_argument naming the model's row width unless kv_type_fits(type, hp.kv_dim()).
  static void check_type(const HParams& hp, kernels::KvType type);
  static constexpr int64_t kPagePadHalves = 5 * 64 / 2;
  static constexpr uint64_t kHugePageBytes = 2u << 20, kSmallPageBytes = 4096;

  // View of one sequence's keys/values in `layer` through its page table (for attention).
  kernels::PagedKv view(int layer, const int32_t* page_table) const;
  uint16_t* k_base(int layer);
  uint16_t* v_base(int layer);
  int64_t page_stride() const { return page_stride_; }
  int64_t row_stride() const { return row_stride_; }
  int kv_dim() const { return kv_dim_; }
  // Copies all layers of one page's first n_tokens rows to another page (prefix-cache partial pages).
  void copy_page(int32_t from, int32_t to, int n_tokens);

 private:
  int n_layer_, kv_dim_, page_tokens_, n_pages_;
  kernels::KvType type_;
  bool keys_in_lanes_;
  int64_t row_stride_, page_stride_;
  uint64_t bytes_;
  uint16_t* base_ = nullptr;
};

}  // namespace infer::model
