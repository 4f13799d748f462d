// When a job is too small to wake the thread pool: the one rule for every caller that hands work to a
// ThreadPool. Below a threshold of multiply-adds the calling thread does the job alone, since waking and
// joining the workers costs more than they save. Kernels take the pool they are given and never decide
// again: a one-thread pool means "run here".
#pragma once
#include <cstdint>

#include "kernels/runtime/thread_pool.h"

namespace infer::kernels {

enum class PoolWork {
  Matmul,     // stories260K's 64×64 matrices are below its threshold
  Attention,  // keys and values come from memory at a few GB/s per thread, so even one or two decode
              // rows gain from the pool: a lower threshold
};

// Multiply-adds from which a job of this kind is worth the pool (infer serve-bench --profile;
// docs/performance.md, "Constants").
constexpr int64_t min_pool_work(PoolWork kind) {
  return kind == PoolWork::Matmul ? int64_t(1) << 20 : int64_t(1) << 16;
}

// `pool` for a job of `multiply_adds`, or `solo` (a one-thread pool) when the job is too small for it.
inline ThreadPool& pool_for(PoolWork kind, int64_t multiply_adds, ThreadPool& pool, ThreadPool& solo) {
  return multiply_adds < min_pool_work(kind) ? solo : pool;
}

}  // namespace infer::kernels
