// The run-time choice of decode streams (decode_streams.h).
#include "kernels/matmul/decode_streams.h"

#include <time.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace infer::kernels {

namespace {
// Calls per phase (both threads of a decode step mostly in the same phase) and phases in all: a few
// tokens of a small model.
constexpr uint64_t kPhaseCalls = 64;
constexpr uint64_t kTrialPhases = 32;

uint64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

int from_environment() {
  const char* v = std::getenv("INFER_DECODE_STREAMS");
  if (v && std::strcmp(v, "1") == 0) return 1;
  if (v && std::strcmp(v, "2") == 0) return 2;
  return 0;
}

struct Trial {
  std::atomic<int> chosen{from_environment()};
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> ns[2] = {0, 0};
  std::atomic<uint64_t> bytes[2] = {0, 0};

  void decide() {
    const double rate1 = double(bytes[0].load()) / double(ns[0].load() + 1);
    const double rate2 = double(bytes[1].load()) / double(ns[1].load() + 1);
    int open = 0;
    chosen.compare_exchange_strong(open, rate1 > rate2 ? 1 : 2);
  }
  void reset(int streams) {
    calls = 0;
    for (int k = 0; k < 2; ++k) ns[k] = bytes[k] = 0;
    chosen = streams;
  }
};

Trial& trial() {
  static Trial t;
  return t;
}
}  // namespace

DecodeStreamsCall decode_streams_begin() {
  Trial& t = trial();
  if (const int c = t.chosen.load(std::memory_order_relaxed)) return {c, 0};
  const uint64_t phase = t.calls.fetch_add(1, std::memory_order_relaxed) / kPhaseCalls;
  if (phase >= kTrialPhases) {
    t.decide();
    return {t.chosen.load(), 0};
  }
  return {1 + static_cast<int>(phase % 2), now_ns()};
}

void decode_streams_end(const DecodeStreamsCall& call, uint64_t bytes) {
  if (call.start_ns == 0) return;
  Trial& t = trial();
  t.ns[call.streams - 1].fetch_add(now_ns() - call.start_ns, std::memory_order_relaxed);
  t.bytes[call.streams - 1].fetch_add(bytes, std::memory_order_relaxed);
}

int decode_streams_chosen() { return trial().chosen.load(); }

void set_decode_streams(int streams) { trial().reset(streams == 1 || streams == 2 ? streams : 0); }

}  // namespace infer::kernels
