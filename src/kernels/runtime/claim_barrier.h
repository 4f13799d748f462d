// The claim-then-wait barrier of a pool job: items [0, n) are claimed a few at a time by whichever
// thread is free, and every thread then waits until all of them are done, so that a second phase can
// read what the first wrote. It cannot hang on a thread that never starts (the others claim its share)
// nor on one that throws: a claimed range counts as done when its claimant leaves it, even by an
// exception, which then propagates without waiting.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>

namespace infer::kernels {

struct ClaimBarrier {
  // Every thread of the job calls this with the same n and claim: fn(begin, end) on each range it
  // claims, then a spin until all n items are done.
  template <class Fn>
  void run(int64_t n, int64_t claim, Fn&& fn) {
    for (int64_t begin = next.fetch_add(claim); begin < n; begin = next.fetch_add(claim)) {
      const int64_t end = std::min(n, begin + claim);
      const Done counted{done, end - begin};
      fn(begin, end);
    }
    while (done.load(std::memory_order_acquire) < n) __builtin_ia32_pause();
  }

  alignas(64) std::atomic<int64_t> next{0};  // first unclaimed item
  alignas(64) std::atomic<int64_t> done{0};  // items finished (or abandoned by an exception)

 private:
  struct Done {
    std::atomic<int64_t>& done;
    int64_t n;
    ~Done() { done.fetch_add(n, std::memory_order_release); }
  };
};

}  // namespace infer::kernels
