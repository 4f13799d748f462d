// LatencyWindow: nearest-rank percentiles over the last kSize requests; requests without a time per
// output token leave that metric alone.
#include <gtest/gtest.h>

#include "engine/latency_window.h"

namespace infer::engine {
namespace {

TEST(LatencyWindow, EmptyIsZero) {
  const LatencySummary s = LatencyWindow().summary();
  EXPECT_EQ(s.samples, 0u);
  EXPECT_EQ(s.ttft_ms.p99, 0);
}

TEST(LatencyWindow, NearestRankPercentiles) {
  LatencyWindow w;
  for (int i = 100; i >= 1; --i) w.add(i, 2 * i, i % 2 ? -1 : i, 10 * i);  // 1..100, in any order
  const LatencySummary s = w.summary();
  EXPECT_EQ(s.samples, 100u);
  EXPECT_EQ(s.queue_ms.p50, 50);
  EXPECT_EQ(s.queue_ms.p90, 90);
  EXPECT_EQ(s.queue_ms.p99, 99);
  EXPECT_EQ(s.ttft_ms.p50, 100);
  EXPECT_EQ(s.e2e_ms.p99, 990);
  // Only the 50 even values have a time per output token: 2, 4, ..., 100.
  EXPECT_EQ(s.tpot_ms.p50, 50);
  EXPECT_EQ(s.tpot_ms.p99, 100);
}

TEST(LatencyWindow, KeepsOnlyTheLastRequests) {
  LatencyWindow w;
  for (size_t i = 0; i < LatencyWindow::kSize; ++i) w.add(1000, 1000, 1000, 1000);
  for (size_t i = 0; i < LatencyWindow::kSize; ++i) w.add(1, 2, 3, 4);
  const LatencySummary s = w.summary();
  EXPECT_EQ(s.samples, LatencyWindow::kSize);
  EXPECT_EQ(s.queue_ms.p99, 1);
  EXPECT_EQ(s.e2e_ms.p99, 4);
}

}  // namespace
}  // namespace infer::engine
