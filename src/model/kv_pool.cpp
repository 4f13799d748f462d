// One allocation for the whole paged KV cache; layout in kv_pool.h.
#include "model/kv_pool.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

namespace infer::model {

void KvPool::check_type(const HParams& hp, kernels::KvType type) {
  if (!kernels::kv_type_fits(type, hp.kv_dim())) {
    throw std::invalid_argument(std::string("KV type ") + kernels::kv_type_name(type) + " needs rows of a multiple of " +
                                std::to_string(kernels::kKvBlockElements) + " elements; this model's are " +
                                std::to_string(hp.kv_dim()));
  }
}

uint64_t KvPool::bytes_per_token(const HParams& hp, kernels::KvType type) {
  return uint64_t(hp.n_layer) * 2 * uint64_t(kernels::kv_row_halves(type, hp.kv_dim())) * 2;
}

uint64_t KvPool::bytes_for(const HParams& hp, int page_tokens, int n_pages, kernels::KvType type) {
  if (page_tokens <= 0 || n_pages <= 0) {
    throw std::runtime_error("KV pool: page_tokens and n_pages must be positive (got " +
                             std::to_string(page_tokens) + ", " + std::to_string(n_pages) + ")");
  }
  const uint64_t per_page = uint64_t(page_stride_for(hp, page_tokens, type)) * 2;
  if (per_page != 0 && uint64_t(n_pages) > std::numeric_limits<uint64_t>::max() / per_page) {
    throw std::runtime_error("KV pool: size overflows");
  }
  return per_page * uint64_t(n_pages);
}

int64_t KvPool::page_stride_for(const HParams& hp, int page_tokens, kernels::KvType type) {
  check_type(hp, type);
  return int64_t(hp.n_layer) * 2 * page_tokens * kernels::kv_row_halves(type, hp.kv_dim()) + kPagePadHalves;
}

KvPool::KvPool(const HParams& hp, int page_tokens, int n_pages, kernels::KvType type)
    : n_layer_(hp.n_layer),
      kv_dim_(hp.kv_dim()),
      page_tokens_(page_tokens),
      n_pages_(n_pages),
      type_(type),
      keys_in_lanes_(kernels::keys_in_lanes(type, hp.head_dim)),
      row_stride_(kernels::kv_row_halves(type, hp.kv_dim())),
      page_stride_(page_stride_for(hp, page_tokens, type)),
      bytes_(bytes_for(hp, page_tokens, n_pages, type)) {
  // Whole 2 MiB pages on a 2 MiB boundary, advised for transparent huge pages: attention reads every
  // running sequence's pages each step (about 100 MB for 8 sequences of 110 tokens on qwen3-0.6b), and
  // with 4 KiB pages most of those reads also miss the TLB.
  const uint64_t rounded = (bytes_ + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  base_ = static_cast<uint16_t*>(std::aligned_alloc(kHugePageBytes, rounded));
  if (!base_) {
    throw std::runtime_error("KV pool: cannot allocate " + std::to_string(bytes_) + " bytes (" +
                             std::to_string(n_pages) + " pages of " + std::to_string(page_tokens) + " tokens)");
  }
  ::madvise(base_, rounded, MADV_HUGEPAGE);  // advice only: without THP this is plain memory
  // Touched now, not on a sequence's first write: no step pays for page faults and zeroing (infer
  // serve-bench; docs/performance.md, Constants), and a machine short of memory shows it at load.
  auto* bytes = reinterpret_cast<volatile uint8_t*>(base_);
  for (uint64_t at = 0; at < rounded; at += kSmallPageBytes) bytes[at] = 0;
}

KvPool::~KvPool() { std::free(base_); }

uint16_t* KvPool::k_base(int layer) { return base_ + int64_t(layer) * 2 * page_tokens_ * row_stride_; }
uint16_t* KvPool::v_base(int layer) { return k_base(layer) + int64_t(page_tokens_) * row_stride_; }

kernels::PagedKv KvPool::view(int layer, const int32_t* page_table) const {
  const uint16_t* k = base_ + int64_t(layer) * 2 * page_tokens_ * row_stride_;
  kernels::PagedKv v{k, k + int64_t(page_tokens_) * row_stride_, page_stride_, page_tokens_, page_table, row_stride_};
  v.type = type_;
  return v;
}

void KvPool::copy_page(int32_t from, int32_t to, int n_tokens) {
  if (from < 0 || from >= n_pages_ || to < 0 || to >= n_pages_ || n_tokens < 0 || n_tokens > page_tokens_) {
    throw std::out_of_range("KV pool copy_page: page " + std::to_string(from) + " -> " + std::to_string(to) +
                            ", " + std::to_string(n_tokens) + " tokens out of range");
  }
  if (from == to) return;
  const size_t row_bytes = size_t(row_stride_) * sizeof(uint16_t);
  for (int l = 0; l < n_layer_; ++l) {
    const int64_t layer_off = int64_t(l) * 2 * page_tokens_ * row_stride_;
    for (int part = 0; part < 2; ++part) {
      const int64_t off = layer_off + int64_t(part) * page_tokens_ * row_stride_;
      // keys in lanes interleave the page's tokens: the whole region (the rows past n_tokens are
      // written before they are read)
      const int rows = part == 0 && keys_in_lanes_ ? page_tokens_ : n_tokens;
      std::memcpy(base_ + int64_t(to) * page_stride_ + off, base_ + int64_t(from) * page_stride_ + off,
                  row_bytes * size_t(rows));
    }
  }
}

}  // namespace infer::model
