// plan_streaming (stream_plan.h): over prefix sums of the layers' bytes, the depth first, then the
// longest resident prefix that fits beside it.
#include "model/stream_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace infer::model {
namespace {

// "N bytes (X MiB)"
std::string bytes_text(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return std::to_string(bytes) + " bytes (" + buf + ")";
}

}  // namespace

StreamPlan plan_streaming(const StreamPlanInput& in) {
  const int n = int(in.layer_bytes.size());
  if (n == 0) throw std::invalid_argument("stream plan: the model has no layers");
  if (in.resident_layers < -1 || in.resident_layers > n) {
    throw std::invalid_argument("stream plan: resident layers " + std::to_string(in.resident_layers) +
                                " out of range [-1, " + std::to_string(n) + "]");
  }
  if (in.depth < 0) throw std::invalid_argument("stream plan: depth " + std::to_string(in.depth) + " is negative");
  if (in.align == 0 || (in.align & (in.align - 1)) != 0) {
    throw std::invalid_argument("stream plan: alignment " + std::to_string(in.align) + " is not a power of two");
  }

  // prefix[r]: bytes of layers [0, r); slot[r]: the largest of layers [r, n), aligned
  std::vector<uint64_t> prefix(size_t(n) + 1, 0), slot(size_t(n) + 1, 0);
  for (int l = 0; l < n; ++l) prefix[size_t(l) + 1] = prefix[size_t(l)] + in.layer_bytes[size_t(l)];
  for (int l = n - 1; l >= 0; --l) {
    const uint64_t b = (in.layer_bytes[size_t(l)] + in.align - 1) & ~(in.align - 1);
    slot[size_t(l)] = std::max(slot[size_t(l) + 1], b);
  }
  auto need = [&](int r, int d) { return in.other_bytes + prefix[size_t(r)] + uint64_t(d) * slot[size_t(r)]; };
  auto fits = [&](int r, int d) { return need(r, d) <= in.budget_bytes; };
  auto plan = [&](int r, int d) {
    d = std::min(d, n - r);
    StreamPlan p;
    p.n_layer = n;
    p.resident_layers = r;
    p.depth = d;
    p.slot_bytes = d > 0 ? slot[size_t(r)] : 0;
    p.resident_bytes = prefix[size_t(r)];
    p.streamed_bytes_per_pass = prefix[size_t(n)] - prefix[size_t(r)];
    p.device_bytes = need(r, d);
    return p;
  };
  const std::string budget = "the weight budget of " + bytes_text(in.budget_bytes);

  if (in.resident_layers == n || (in.resident_layers < 0 && fits(n, 0))) {
    if (!fits(n, 0)) {
      throw std::runtime_error("stream plan: keeping all " + std::to_string(n) + " layers resident needs " +
                               bytes_text(need(n, 0)) + ", over " + budget);
    }
    return plan(n, 0);
  }
  if (!fits(0, 1)) {
    throw std::runtime_error("stream plan: " + budget + " cannot hold the non-layer weights (" +
                             bytes_text(in.other_bytes) + ") and one slot for the largest layer (" +
                             bytes_text(slot[0]) + "): at least " + bytes_text(need(0, 1)) + " are needed");
  }

  // The depth that hides a copy of the largest layer behind one layer's compute.
  int want = 2;
  if (in.depth > 0) {
    want = in.depth;
  } else if (in.copy_bytes_per_s > 0 && in.layer_compute_s > 0) {
    const double copy_s = double(slot[0]) / in.copy_bytes_per_s;
    want = std::max(2, int(std::min(double(n), std::ceil(copy_s / in.layer_compute_s))) + 1);
  }
  want = std::min(want, n);

  if (in.resident_layers >= 0) {  // the prefix is given: the deepest pipeline beside it that fits
    const int r = in.resident_layers;
    const int lowest = in.depth > 0 ? std::min(want, n - r) : 1;
    for (int d = std::min(want, n - r); d >= lowest; --d) {
      if (fits(r, d)) return plan(r, d);
    }
    throw std::runtime_error("stream plan: keeping " + std::to_string(r) + " layers resident (" +
                             bytes_text(prefix[size_t(r)]) + ") beside " + std::to_string(lowest) + " slot(s) of " +
                             bytes_text(slot[size_t(r)]) + " and the non-layer weights (" +
                             bytes_text(in.other_bytes) + ") needs " + bytes_text(need(r, lowest)) + ", over " +
                             budget);
  }
  int d = want;
  if (in.depth == 0) {
    while (d > 1 && !fits(0, d)) --d;
  } else if (!fits(0, d)) {
    throw std::runtime_error("stream plan: " + std::to_string(d) + " slots of " + bytes_text(slot[0]) +
                             " beside the non-layer weights (" + bytes_text(in.other_bytes) + ") need " +
                             bytes_text(need(0, d)) + ", over " + budget);
  }
  int r = n - 1;  // the longest prefix that fits (r = 0 does)
  while (r > 0 && !fits(r, std::min(d, n - r))) --r;
  return plan(r, d);
}

}  // namespace infer::model
