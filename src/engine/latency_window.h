// The latencies of a model's most recent finished requests (INFO infer and INFER.STATS report their
// percentiles): time in queue, time to first token, time per output token after the first, and end to
// end, over the last kSize requests that ended normally (stop or length). Not thread-safe: the
// scheduler records under its stats mutex and summarises a copy.
#pragma once
#include <array>
#include <cstddef>

namespace infer::engine {

struct LatencyPercentiles {
  double p50 = 0, p90 = 0, p99 = 0;  // milliseconds; 0 with no sample
};

struct LatencySummary {
  size_t samples = 0;  // requests in the window
  LatencyPercentiles queue_ms, ttft_ms, tpot_ms, e2e_ms;
};

class LatencyWindow {
 public:
  static constexpr size_t kSize = 1024;
  // tpot_ms < 0: the request generated at most one token (it has no time per output token).
  void add(double queue_ms, double ttft_ms, double tpot_ms, double e2e_ms);
  // Nearest-rank percentiles; a sort of at most kSize values per metric.
  LatencySummary summary() const;

 private:
  std::array<std::array<float, 4>, kSize> ring_{};
  size_t size_ = 0, next_ = 0;
};

}  // namespace infer::engine
