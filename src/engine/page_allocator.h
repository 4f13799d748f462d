// Which KV pool page belongs to whom: a free list plus a reference count per page, so that running
// sequences and the radix prefix cache can share pages. Storage itself is model::KvPool's job.
//
// Thread-safety: none; only the engine's scheduler thread touches it. The counters it reports are
// copied into EngineStats by that thread.
#pragma once
#include <cstdint>
#include <vector>

namespace infer::engine {

class PageAllocator {
 public:
  explicit PageAllocator(int n_pages);  // every page starts free

  int n_total() const { return int(refcount_.size()); }
  int n_free() const { return int(free_.size()); }
  int n_used() const { return n_total() - n_free(); }

  // Takes n free pages (reference count 1 each) and appends them to `out`. All or nothing: returns
  // false, changing nothing, when fewer than n pages are free.
  bool allocate(int n, std::vector<int32_t>& out);
  // One more owner of an allocated page. Throws std::logic_error for a free or out-of-range page.
  void retain(int32_t page);
  // One owner fewer; at zero the page goes back to the free list. Throws std::logic_error on a free page
  // (a double release is a bug that would otherwise corrupt another sequence's KV).
  void release(int32_t page);
  // Releases every page in `pages` and clears it.
  void release_all(std::vector<int32_t>& pages);
  int refcount(int32_t page) const;

 private:
  void check(int32_t page) const;
  std::vector<int32_t> refcount_;
  std::vector<int32_t> free_;  // a stack: the most recently freed page is reused first
};

}  // namespace infer::engine
