#include "engine/page_allocator.h"

#include <gtest/gtest.h>

#include <stdexcept>

using infer::engine::PageAllocator;

TEST(PageAllocator, AllocatesAllOrNothing) {
  PageAllocator a(4);
  std::vector<int32_t> pages;
  EXPECT_TRUE(a.allocate(3, pages));
  EXPECT_EQ(pages, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a.n_free(), 1);
  EXPECT_FALSE(a.allocate(2, pages));
  EXPECT_EQ(pages.size(), 3u);
  EXPECT_EQ(a.n_free(), 1);
  EXPECT_TRUE(a.allocate(1, pages));
  EXPECT_EQ(a.n_free(), 0);
  a.release_all(pages);
  EXPECT_TRUE(pages.empty());
  EXPECT_EQ(a.n_free(), 4);
}

TEST(PageAllocator, SharedPageFreedByLastOwner) {
  PageAllocator a(2);
  std::vector<int32_t> pages;
  ASSERT_TRUE(a.allocate(1, pages));
  a.retain(pages[0]);
  EXPECT_EQ(a.refcount(pages[0]), 2);
  a.release(pages[0]);
  EXPECT_EQ(a.n_free(), 1);
  a.release(pages[0]);
  EXPECT_EQ(a.n_free(), 2);
  EXPECT_EQ(a.refcount(pages[0]), 0);
}

TEST(PageAllocator, RejectsDoubleReleaseAndBadPages) {
  PageAllocator a(2);
  std::vector<int32_t> pages;
  ASSERT_TRUE(a.allocate(1, pages));
  a.release(pages[0]);
  EXPECT_THROW(a.release(pages[0]), std::logic_error);
  EXPECT_THROW(a.retain(pages[0]), std::logic_error);
  EXPECT_THROW(a.retain(7), std::logic_error);
  EXPECT_THROW(a.release(-1), std::logic_error);
}
