// Storage for the paged KV cache: one pool of fixed-size pages (F16) shared by all sequences.
// Layout: page p, layer l holds K rows then V rows, each page_tokens × kv_dim halves:
//   k(p, l) = base + p * page_stride + (l * 2 + 0) * page_tokens * kv_dim
//   v(p, l) = k(p, l) + page_tokens * kv_dim
// page_stride = n_layer * 2 * page_tokens * kv_dim + kPagePadHalves. The pad (5 cache lines) keeps
// pages off the same cache sets: a page's size is usually a multiple of 256 KiB, so without it the
// same layer's rows of every page map to the same L1/L2 sets, and a long prompt's attention, which
// reads them all per query row, thrashes (a 2,050-token prefill; docs/performance.md, Constants).
// This class only stores; which page belongs to whom (allocation, reference counts, prefix sharing) is
// the engine's job. Memory is allocated and touched once at construction and never grows.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/ops.h"
#include "model/hparams.h"

namespace infer::model {

class KvPool {
 public:
  // Throws std::runtime_error with the byte count when the pool cannot be allocated.
  KvPool(const HParams& hp, int page_tokens, int n_pages);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  int page_tokens() const { return page_tokens_; }
  int n_pages() const { return n_pages_; }
  uint64_t bytes() const { return bytes_; }
  static uint64_t bytes_for(const HParams& hp, int page_tokens, int n_pages);
  static int64_t page_stride_for(const HParams& hp, int page_tokens);
  static constexpr int64_t kPagePadHalves = 5 * 64 / 2;
  static constexpr uint64_t kHugePageBytes = 2u << 20, kSmallPageBytes = 4096;

  // View of one sequence's keys/values in `layer` through its page table (for attention).
  kernels::PagedKv view(int layer, const int32_t* page_table) const;
  uint16_t* k_base(int layer);
  uint16_t* v_base(int layer);
  int64_t page_stride() const { return page_stride_; }
  int kv_dim() const { return kv_dim_; }
  // Copies all layers of one page's first n_tokens rows to another page (prefix-cache partial pages).
  void copy_page(int32_t from, int32_t to, int n_tokens);

 private:
  int n_layer_, kv_dim_, page_tokens_, n_pages_;
  int64_t page_stride_;
  uint64_t bytes_;
  uint16_t* base_ = nullptr;
};

}  // namespace infer::model
