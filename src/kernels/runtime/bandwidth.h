// Memory read-bandwidth probe: what `infer bench` compares decode speed against.
#pragma once
#include <cstddef>

#include "kernels/runtime/thread_pool.h"

namespace infer::kernels {

// Sums a `bytes`-long float array (allocated and touched once here), split in contiguous slices
// across the pool's threads, `repeats` times; returns the best rate in GB/s (1e9 bytes per second).
// AVX2 when use_avx2(), scalar otherwise. Takes the pool for the duration; allocates `bytes`.
double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t{1} << 30, int repeats = 3);

}  // namespace infer::kernels
