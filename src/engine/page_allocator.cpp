#include "engine/page_allocator.h"

#include <stdexcept>
#include <string>

namespace infer::engine {

PageAllocator::PageAllocator(int n_pages) {
  if (n_pages < 0) throw std::invalid_argument("PageAllocator: negative page count");
  refcount_.assign(size_t(n_pages), 0);
  free_.reserve(size_t(n_pages));
  // Highest first so that allocation hands out pages 0, 1, 2 ... on a fresh pool.
  for (int p = n_pages - 1; p >= 0; --p) free_.push_back(p);
}

bool PageAllocator::allocate(int n, std::vector<int32_t>& out) {
  if (n < 0 || n > n_free()) return false;
  for (int i = 0; i < n; ++i) {
    int32_t p = free_.back();
    free_.pop_back();
    refcount_[size_t(p)] = 1;
    out.push_back(p);
  }
  return true;
}

void PageAllocator::check(int32_t page) const {
  if (page < 0 || page >= n_total())
    throw std::logic_error("KV page " + std::to_string(page) + " out of range [0, " +
                           std::to_string(n_total()) + ")");
  if (refcount_[size_t(page)] <= 0)
    throw std::logic_error("KV page " + std::to_string(page) + " is not allocated");
}

void PageAllocator::retain(int32_t page) {
  check(page);
  ++refcount_[size_t(page)];
}

void PageAllocator::release(int32_t page) {
  check(page);
  if (--refcount_[size_t(page)] == 0) free_.push_back(page);
}

void PageAllocator::release_all(std::vector<int32_t>& pages) {
  for (int32_t p : pages) release(p);
  pages.clear();
}

int PageAllocator::refcount(int32_t page) const {
  if (page < 0 || page >= n_total()) return 0;
  return refcount_[size_t(page)];
}

}  // namespace infer::engine
