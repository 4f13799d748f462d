#include "engine/latency_window.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace infer::engine {

void LatencyWindow::add(double queue_ms, double ttft_ms, double tpot_ms, double e2e_ms) {
  ring_[next_] = {float(queue_ms), float(ttft_ms), float(tpot_ms), float(e2e_ms)};
  next_ = (next_ + 1) % kSize;
  size_ = std::min(size_ + 1, kSize);
}

LatencySummary LatencyWindow::summary() const {
  LatencySummary out;
  out.samples = size_;
  LatencyPercentiles* targets[4] = {&out.queue_ms, &out.ttft_ms, &out.tpot_ms, &out.e2e_ms};
  std::vector<float> v;
  v.reserve(size_);
  for (int m = 0; m < 4; ++m) {
    v.clear();
    for (size_t i = 0; i < size_; ++i)
      if (ring_[i][m] >= 0) v.push_back(ring_[i][m]);
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    auto rank = [&](double p) { return double(v[size_t(std::ceil(p * double(v.size()))) - 1]); };
    *targets[m] = {rank(0.50), rank(0.90), rank(0.99)};
  }
  return out;
}

}  // namespace infer::engine
