#include "engine/admission_queue.h"

#include <gtest/gtest.h>

#include <thread>

using infer::engine::AdmissionQueue;

TEST(AdmissionQueue, RefusesWhenFull) {
  AdmissionQueue<int> q(2);
  int a = 1, b = 2, c = 3;
  EXPECT_TRUE(q.try_push(a, 0));
  EXPECT_TRUE(q.try_push(b, 0));
  EXPECT_FALSE(q.try_push(c, 5));
  EXPECT_EQ(q.size(), 2u);
}

TEST(AdmissionQueue, HigherPriorityFirstFifoWithin) {
  AdmissionQueue<int> q(8);
  int items[] = {10, 11, 20, 12, 21, 0};
  int prio[] = {1, 1, 2, 1, 2, 0};
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(q.try_push(items[i], prio[i]));
  std::vector<int> out;
  q.admit_front([](int&) { return true; }, out);
  EXPECT_EQ(out, (std::vector<int>{20, 21, 10, 11, 12, 0}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(AdmissionQueue, StopsAtFirstRefusalSoHeadIsNeverOvertaken) {
  AdmissionQueue<int> q(8);
  for (int v : {1, 100, 2}) ASSERT_TRUE(q.try_push(v, 0));
  std::vector<int> out;
  q.admit_front([](int& v) { return v < 50; }, out);
  EXPECT_EQ(out, (std::vector<int>{1}));
  EXPECT_EQ(q.size(), 2u);
}

TEST(AdmissionQueue, RemoveIfKeepsOrderOfTheRest) {
  AdmissionQueue<int> q(8);
  for (int v : {1, 2, 3, 4, 5}) ASSERT_TRUE(q.try_push(v, 0));
  std::vector<int> removed, rest;
  q.remove_if([](const int& v) { return v % 2 == 0; }, removed);
  q.admit_front([](int&) { return true; }, rest);
  EXPECT_EQ(removed, (std::vector<int>{2, 4}));
  EXPECT_EQ(rest, (std::vector<int>{1, 3, 5}));
}

TEST(AdmissionQueue, ConcurrentProducersNeverExceedCapacity) {
  AdmissionQueue<int> q(16);
  std::atomic<int> accepted{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t)
    producers.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        int v = i;
        if (q.try_push(v, i % 3)) accepted++;
      }
    });
  for (auto& t : producers) t.join();
  EXPECT_EQ(accepted.load(), 16);
  EXPECT_EQ(q.size(), 16u);
}
