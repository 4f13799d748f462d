#include "engine/radix_tree.h"

#include <gtest/gtest.h>

#include <random>

using infer::engine::PageAllocator;
using infer::engine::RadixTree;

namespace {
// A sequence's own pages for `n_tokens` tokens (whole pages only), as the scheduler would hold them.
std::vector<int32_t> own_pages(PageAllocator& a, int n_pages) {
  std::vector<int32_t> p;
  EXPECT_TRUE(a.allocate(n_pages, p));
  return p;
}
}  // namespace

TEST(RadixTree, MatchesLongestWholePagePrefix) {
  PageAllocator a(16);
  RadixTree t(a, 2);
  std::vector<int32_t> seq{1, 2, 3, 4, 5, 6, 7};
  auto pages = own_pages(a, 3);
  t.insert(seq, pages);
  a.release_all(pages);  // the sequence finished; only the tree holds them now
  EXPECT_EQ(t.cached_pages(), 3);
  EXPECT_EQ(a.n_used(), 3);

  std::vector<int32_t> q{1, 2, 3, 4, 9, 9};
  auto m = t.match(q, 100);
  EXPECT_EQ(m.n_tokens(), 4);
  ASSERT_EQ(m.pages.size(), 2u);
  EXPECT_EQ(a.refcount(m.pages[0]), 2);
  EXPECT_EQ(t.evictable_pages(), 1);  // the unmatched tail page after the split
  t.unlock(m.node);
  a.release_all(m.pages);
  EXPECT_EQ(t.evictable_pages(), 3);
}

TEST(RadixTree, PartialPageIsNotMatched) {
  PageAllocator a(8);
  RadixTree t(a, 4);
  std::vector<int32_t> seq{1, 2, 3, 4, 5, 6, 7, 8};
  auto pages = own_pages(a, 2);
  t.insert(seq, pages);
  a.release_all(pages);
  std::vector<int32_t> q{1, 2, 3, 4, 5, 6, 0, 0};  // second page differs in its third token
  auto m = t.match(q, 100);
  EXPECT_EQ(m.n_tokens(), 4);
  t.unlock(m.node);
  a.release_all(m.pages);
}

TEST(RadixTree, MaxPagesCapsTheMatch) {
  PageAllocator a(8);
  RadixTree t(a, 2);
  std::vector<int32_t> seq{1, 2, 3, 4, 5, 6};
  auto pages = own_pages(a, 3);
  t.insert(seq, pages);
  a.release_all(pages);
  auto m = t.match(seq, 2);  // e.g. the last prompt token must be recomputed for its logits
  EXPECT_EQ(m.n_tokens(), 4);
  t.unlock(m.node);
  a.release_all(m.pages);
}

TEST(RadixTree, InsertKeepsExistingPagesForKnownPrefix) {
  PageAllocator a(16);
  RadixTree t(a, 2);
  std::vector<int32_t> s1{1, 2, 3, 4};
  std::vector<int32_t> s2{1, 2, 3, 4, 5, 6};
  auto p1 = own_pages(a, 2);
  t.insert(s1, p1);
  auto p2 = own_pages(a, 3);  // computed the same prefix independently
  t.insert(s2, p2);
  a.release_all(p1);
  a.release_all(p2);
  EXPECT_EQ(t.cached_pages(), 3);
  EXPECT_EQ(a.n_used(), 3);  // s2's duplicate pages went back to the pool
  auto m = t.match(s2, 100);
  EXPECT_EQ(m.n_tokens(), 6);
  t.unlock(m.node);
  a.release_all(m.pages);
}

TEST(RadixTree, LockedNodesAreNotEvictedAndLruGoesFirst) {
  PageAllocator a(16);
  RadixTree t(a, 2);
  std::vector<int32_t> old_seq{1, 1, 1, 1};
  std::vector<int32_t> new_seq{2, 2, 2, 2};
  std::vector<int32_t> used_seq{3, 3};
  for (auto* s : {&old_seq, &new_seq, &used_seq}) {
    auto p = own_pages(a, int(s->size() / 2));
    t.insert(*s, p);
    a.release_all(p);
  }
  auto locked = t.match(used_seq, 100);
  auto touch = t.match(new_seq, 100);  // new_seq is now more recent than old_seq
  t.unlock(touch.node);
  a.release_all(touch.pages);

  EXPECT_EQ(t.evict(1), 1);  // trims old_seq's tail
  auto m_old = t.match(old_seq, 100);
  EXPECT_EQ(m_old.n_tokens(), 2);
  t.unlock(m_old.node);
  a.release_all(m_old.pages);

  EXPECT_EQ(t.evict(100), 3);  // everything but the locked page
  EXPECT_EQ(t.cached_pages(), 1);
  EXPECT_EQ(a.n_used(), 1);
  t.unlock(locked.node);
  a.release_all(locked.pages);
  t.flush();
  EXPECT_EQ(a.n_free(), 16);
  EXPECT_EQ(t.evicted_pages(), 5u);
}

TEST(RadixTree, RandomInsertMatchEvictNeverLeaksPages) {
  std::mt19937 rng(7);
  PageAllocator a(64);
  {
    RadixTree t(a, 2);
    for (int round = 0; round < 500; ++round) {
      std::vector<int32_t> seq(size_t(2 + rng() % 12));
      for (auto& x : seq) x = int32_t(rng() % 3);
      auto m = t.match(seq, int(seq.size() / 2));
      int need = int(seq.size() / 2) - int(m.pages.size());
      if (a.n_free() < need) t.evict(need - a.n_free());
      std::vector<int32_t> table = m.pages;
      ASSERT_TRUE(a.allocate(need, table));
      t.insert(seq, table);
      t.unlock(m.node);
      a.release_all(table);
      ASSERT_EQ(a.n_used(), t.cached_pages());
      ASSERT_EQ(t.evictable_pages(), t.cached_pages());
    }
    t.flush();
    EXPECT_EQ(a.n_free(), 64);
  }
}
