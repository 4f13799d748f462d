// The per-type kernels matmul is built from, chosen once by CPU features. Internal to src/kernels.
#pragma once
#include <cstdint>

#include "kernels/quant/quant.h"

namespace infer::kernels {

// Dots one weight row with `n_rows` (1..kMaxRows) activation rows, already in activation_type:
// out[r * out_stride] = w_row · act[r], where act[r] starts at act + r * act_stride bytes.
// Invariant 7: the value for each r is bitwise the same whatever n_rows is and wherever r sits.
using DotRowsFn = void (*)(int64_t n, const void* w_row, const uint8_t* act, uint64_t act_stride, int n_rows,
                           float* out, int64_t out_stride);
// Converts n floats into the kernel set's activation blocks: activation_type(weight), bit-identical to
// quantize_activation_row, except that the AVX2 Q8_0/Q4_0/Q5_0 set writes BlockQ8_0F (same codes, the
// same scale value held as f32), the AVX2 Q5_1 set BlockQ8_1F (the same plus the codes' sum) and the
// AVX2 F16/BF16 sets each rounded value as an f32.
using QuantizeActFn = void (*)(const float* src, void* dst, int64_t n);
// Dots `n_w` consecutive weight rows (row_bytes apart) with one activation row: out[o] = w[o] · act.
// Decode only: keeps several weight streams in flight. Each out[o] is bitwise what dot_rows gives.
using DotOutputsFn = void (*)(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                              float* out);

// Dots `n_w` consecutive weight rows (row_bytes apart) with `n_rows` (≥ 1) activation rows:
// out[r * out_stride + o] = w[o] · act[r]. Batches only (AMX tiles: weights unpacked once for all the
// rows; AVX2: several rows per pass over each weight row); each value is bitwise what dot_rows and
// dot_outputs give.
using DotTileFn = void (*)(int64_t n, const void* w, uint64_t row_bytes, int64_t n_w, const uint8_t* act,
                           uint64_t act_stride, int n_rows, float* out, int64_t out_stride);

inline constexpr int kMaxRows = 4;

struct RowKernels {
  DotRowsFn dot_rows;
  QuantizeActFn quantize_act;
  int64_t act_block_elements;  // geometry of quantize_act's blocks
  uint64_t act_block_bytes;
  DotOutputsFn dot_outputs = nullptr;  // optional (AVX2, AVX-512 BF16); null: call dot_rows per weight row
  // optional: AMX tiles (Q4_K, Q6_K, BF16), AVX-512 VNNI tiles (Q8_0, Q4_0, Q5_0, Q5_1), AVX-512 FMA
  // tiles or AVX2 register tiles (float rows and every quantised type); null: call dot_rows per weight row
  DotTileFn dot_tile = nullptr;
  // The interleaved layout (interleave.h; AVX-512 VNNI machines): the same contracts over whole groups
  // of 16 weight rows (w at a group's start, n_w a multiple of 16), each value bitwise what the row
  // layout's kernels give for the same rows.
  DotOutputsFn dot_outputs_interleaved = nullptr;
  DotTileFn dot_tile_interleaved = nullptr;  // optional (AMX only): large batches
  DotTileFn dot_rows_interleaved = nullptr;  // batches: AVX-512 VNNI, 8 rows a pass
  DotTileFn dot_tile_vnni_interleaved = nullptr;  // optional: larger batches, AVX-512 VNNI tile
  DotTileFn dot_planes_interleaved = nullptr;     // optional (AMX only): mid-size batches on AMX planes

  uint64_t act_row_bytes(int64_t n) const { return static_cast<uint64_t>(n / act_block_elements) * act_block_bytes; }
};

// AVX2 kernels when use_avx2(), the scalar references otherwise. Throws for unsupported types.
RowKernels row_kernels(TensorType weight);
// The scalar references only (tests, INFER_FORCE_SCALAR).
RowKernels scalar_row_kernels(TensorType weight);
// The AVX2 kernels; null members where the type has no AVX2 version. Call only when use_avx2().
RowKernels avx2_row_kernels(TensorType weight);
// The AMX tile kernel of a type (null where there is none). Call only when use_amx().
DotTileFn amx_dot_tile(TensorType weight);
// The AVX-512 batch kernel of a type's row layout, for types without an AMX one, over the AVX2 set's
// activation blocks: VNNI for Q8_0, Q4_0, Q5_0, Q5_1; FMAs for F32, F16, BF16 (512-bit where use_avx512_fma_tiles(),
// else 256-bit over AVX-512VL's 32 registers); null for others. Call only when use_avx512().
DotTileFn avx512_dot_tile(TensorType weight);
// The AVX-512 BF16 kernel set of BF16 weights, activations as bf16 (null dot_rows for other types).
// Call only when use_avx512_bf16().
RowKernels avx512_bf16_row_kernels(TensorType weight);
// The AMX-BF16 kernel set of BF16 weights, activations as bf16 (null dot_rows for other types). Call
// only when use_amx_bf16().
RowKernels amx_bf16_row_kernels(TensorType weight);
// The same kernels on a software model of the tile instructions (tests on CPUs without AMX). Call
// only when use_avx512_bf16().
RowKernels amx_bf16_row_kernels_model(TensorType weight);
// The AMX-INT8 batch kernel of Q8_0 or Q4_0 (row or interleaved layout) on a software model of the
// tile instructions (tests on CPUs without AMX); null for other types. Call only when use_avx512().
DotTileFn amx_int8_tile_model(TensorType weight, bool interleaved);
// The interleaved layout's kernels of a type (null members where there are none). Call only when
// use_avx512(), and with `tiles` only when use_amx(): without it, no tile kernel and no planes.
struct InterleavedKernels {
  DotOutputsFn dot_outputs = nullptr;
  DotTileFn dot_tile = nullptr;
  DotTileFn dot_rows = nullptr;
  DotTileFn dot_tile_vnni = nullptr;
  DotTileFn dot_planes = nullptr;
};
InterleavedKernels avx512_interleaved_kernels(TensorType weight, bool tiles);

}  // namespace infer::kernels
