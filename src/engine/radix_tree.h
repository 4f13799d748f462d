// The radix prefix cache (RadixAttention): a tree over token ids whose edges are runs of whole KV pages,
// mapping every cached prefix to the pages that hold its keys and values.
//
// Page granularity: a node's run is always a multiple of page_tokens tokens and owns exactly
// run/page_tokens pages, so a page is shared only when all of its tokens (at the same positions) match.
// Children are keyed by their first page's tokens. A partial last page is never cached: the tokens past
// the last whole cached page are recomputed by the request into a private page (by invariant 7 the
// result is bitwise what the cache would have held).
//
// Ownership: the tree holds one reference (PageAllocator) on each of its pages. match() hands the caller
// one more reference on each matched page and locks the matched path; the caller must release those
// pages and unlock() the node when done. Locked nodes are never evicted; unlocked leaves are evicted
// least-recently-used first, trimming pages from their tail.
//
// Thread-safety: none; the scheduler thread only.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "engine/page_allocator.h"

namespace infer::engine {

class RadixTree {
 public:
  struct Node;

  struct Match {
    Node* node = nullptr;          // deepest matched node, locked (null when nothing matched)
    std::vector<int32_t> pages;    // matched pages in order, each retained for the caller
    int n_tokens() const { return n_tokens_; }
    int n_tokens_ = 0;
  };

  RadixTree(PageAllocator& pages, int page_tokens);
  ~RadixTree();  // releases the tree's page references (nodes must be unlocked)
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  // Longest cached prefix of `tokens`, in whole pages, at most max_pages pages.
  Match match(std::span<const int32_t> tokens, int max_pages);
  // Undoes match()'s lock on the path to `node` (null: no-op). Does not release the caller's pages.
  void unlock(Node* node);

  // Caches tokens[0, pages.size() * page_tokens) whose KV is in `pages` (the caller's page table).
  // The tree retains the pages it adopts; for prefixes already cached it keeps its own pages. The
  // caller keeps (and later releases) its references either way.
  void insert(std::span<const int32_t> tokens, std::span<const int32_t> pages);

  // Evicts unlocked pages, least-recently-used leaves first, until n_pages have been released or nothing
  // evictable is left. Returns the number of pages the tree let go.
  int evict(int n_pages);
  // Evicts every unlocked node.
  void flush();

  int cached_pages() const { return cached_pages_; }        // pages the tree references
  int evictable_pages() const { return evictable_pages_; }  // of those, in unlocked nodes
  uint64_t evicted_pages() const { return evicted_pages_; } // total, since creation (flush included)
  int page_tokens() const { return page_tokens_; }

 private:
  using Key = std::vector<int32_t>;  // a node's first page of tokens
  Node* split(Node* node, int n_pages);
  void lock_path(Node* node, int delta);
  Node* lru_leaf() const;
  void trim_leaf(Node* leaf, int n_pages);

  PageAllocator& alloc_;
  int page_tokens_;
  std::unique_ptr<Node> root_;
  int cached_pages_ = 0, evictable_pages_ = 0;
  uint64_t evicted_pages_ = 0;
  uint64_t clock_ = 0;  // logical time for LRU
};

struct RadixTree::Node {
  Node* parent = nullptr;
  std::vector<int32_t> tokens;  // run of this edge, pages.size() * page_tokens long
  std::vector<int32_t> pages;
  std::map<Key, std::unique_ptr<Node>> children;
  int lock_ref = 0;             // running requests whose match passes through here
  uint64_t last_use = 0;
};

}  // namespace infer::engine
