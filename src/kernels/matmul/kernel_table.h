// One row per weight type: the matmul kernels each instruction set has for it (null: none there). The
// formats' own traits (activation format, references) are quant/format_traits.h; which of these
// kernels runs for a given batch on this CPU is kernel_plan.h's choice. Internal to src/kernels.
#pragma once
#include "kernels/matmul/row_kernels.h"

namespace infer::kernels {

struct KernelTableRow {
  TensorType type;
  DotRowsFn scalar_rows;  // the reference dot, per activation row
  RowKernels avx2;        // x86/avx2: the row set, over the AVX2 activation blocks
  // x86/avx512, the row layout's batch tile over the AVX2 set's activation blocks: VNNI for the
  // 32-element block formats, FMAs for float rows (512-bit, or 256-bit over 32 registers where the
  // 512-bit FMA probe finds half rate).
  DotTileFn avx512_vnni_tile;
  DotTileFn avx512_fma_tile;
  DotTileFn avx512_fma256_tile;
  // x86/avx512, the interleaved layout (AVX-512 VNNI): decode, batch (8 rows a pass), and the tile
  // that unpacks each group once for larger batches.
  DotOutputsFn interleaved_decode;
  DotTileFn interleaved_rows;
  DotTileFn interleaved_tile;
  // x86/amx (AMX-INT8): the row layout's tile, the interleaved layout's tile (large batches), and AMX
  // planes for mid-size interleaved batches.
  DotTileFn amx_tile;
  DotTileFn amx_interleaved_tile;
  DotTileFn amx_interleaved_planes;
  // x86/avx512bf16 (BF16 weights only): the AVX-512 BF16 set, activations as bf16. The AMX-BF16 set
  // is amx_bf16_row_kernels() (x86/amxbf16).
  RowKernels avx512_bf16;
  // The files under src/kernels that hold them, for reports (null: none).
  struct Files {
    const char* ref;
    const char* avx2;
    const char* avx512_tile;
    const char* interleaved;
    const char* interleaved_tile;
    const char* amx;
  } files;
};

// The row of a weight type; throws std::invalid_argument for a type matmul does not multiply.
const KernelTableRow& kernel_table_row(TensorType weight);
// The same, or null for a type matmul does not multiply.
const KernelTableRow* find_kernel_table_row(TensorType weight);

}  // namespace infer::kernels
