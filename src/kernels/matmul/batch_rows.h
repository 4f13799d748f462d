// Every activation-row threshold of matmul's kernel choice, in one place: kernel_plan.cpp chooses by
// them, and the AVX2 K-quant tiles, which take a row kernel below their first, read the same constant.
// Each names the benchmark that set it (figures: docs/performance.md, "Constants"). Internal to
// src/kernels; constants only, so every instruction set's files may include it.
#pragma once

namespace infer::kernels::batch_rows {

// The row layout: up to this many rows, the decode kernel once per row; its streams keep more reads
// in flight than the batch kernels (bench_kernels BM_MatmulBatch at 2 rows).
inline constexpr int kDecodeKernelUpTo = 2;

// The interleaved layout on an AMX CPU: up to this many rows the AVX-512 VNNI kernels, more the AMX
// tiles, which win for prefill (BM_MatmulBatch, infer bench pp512).
inline constexpr int kVnniBeforeAmxUpTo = 16;
// Interleaved Q4_K on an AMX CPU: from this many rows (up to kVnniBeforeAmxUpTo) the AMX planes; at 8
// rows the small matrices gain nothing from them (BM_MatmulBatch, infer serve-bench).
inline constexpr int kAmxPlanesFrom = 12;

// The interleaved layout without AMX: up to this many rows the VNNI kernel meets the units as they lie,
// 8 rows a pass; more take the VNNI tile, each group unpacked once for all of them (BM_MatmulBatch,
// 12-128 rows). Q4_K's passes unpack least (no fifth bits), so they stay ahead longest.
inline constexpr int kQ8_0Q4_0PassesUpTo = 32;
inline constexpr int kQ4KPassesUpTo = 32;
inline constexpr int kQ5KQ6KPassesUpTo = 16;

// The AVX2 K-quant register tiles (Q4_K, Q5_K, Q6_K) from this many rows; fewer take the row kernel
// (BM_MatmulBatch with INFER_NO_AVX512=1).
inline constexpr int kAvx2KTileFrom = 4;

}  // namespace infer::kernels::batch_rows
