// Run-time choice between the scalar, AVX2, AVX-512 and AMX row kernels, over the kernel table.
#include "kernels/matmul/row_kernels.h"

#include <array>

#include "kernels/matmul/kernel_table.h"
#include "kernels/quant/format_traits.h"
#include "kernels/runtime/cpu_features.h"

namespace infer::kernels {

RowKernels scalar_row_kernels(TensorType weight) {
  const TensorType a = activation_type(weight);  // throws for unsupported types
  const KernelTableRow& row = kernel_table_row(weight);
  return RowKernels{row.scalar_rows, format_traits(weight, "scalar_row_kernels").quantize_activation,
                    block_elements(a), block_bytes(a)};
}

RowKernels avx2_row_kernels(TensorType weight) {
  const KernelTableRow* row = find_kernel_table_row(weight);
  return row ? row->avx2 : RowKernels{nullptr, nullptr, 1, 0};
}

DotTileFn amx_dot_tile(TensorType weight) {
  if (weight == TensorType::BF16) return use_amx_bf16() ? amx_bf16_row_kernels(weight).dot_tile : nullptr;
  const KernelTableRow* row = find_kernel_table_row(weight);
  return row ? row->amx_tile : nullptr;
}

DotTileFn avx512_dot_tile(TensorType weight) {
  const KernelTableRow* row = find_kernel_table_row(weight);
  if (!row) return nullptr;
  if (row->avx512_vnni_tile) return row->avx512_vnni_tile;
  return use_avx512_fma_tiles() ? row->avx512_fma_tile : row->avx512_fma256_tile;
}

RowKernels avx512_bf16_row_kernels(TensorType weight) {
  if (weight != TensorType::BF16) return {nullptr, nullptr, 1, 1};
  return kernel_table_row(weight).avx512_bf16;
}

InterleavedKernels avx512_interleaved_kernels(TensorType weight, bool tiles) {
  const KernelTableRow* row = find_kernel_table_row(weight);
  if (!row) return {};
  InterleavedKernels k{row->interleaved_decode, nullptr, row->interleaved_rows, row->interleaved_tile, nullptr};
  if (tiles) {
    k.dot_tile = row->amx_interleaved_tile;
    k.dot_planes = row->amx_interleaved_planes;
  }
  return k;
}

namespace {
RowKernels choose(TensorType weight) {
  if (use_amx_bf16()) {
    if (const RowKernels tiles = amx_bf16_row_kernels(weight); tiles.dot_rows) return tiles;
  }
  RowKernels k = scalar_row_kernels(weight);
  if (use_avx2()) {
    const RowKernels fast = avx2_row_kernels(weight);
    if (fast.dot_rows) k.dot_rows = fast.dot_rows;
    // dot_outputs reads the blocks dot_rows reads: the fast quantiser's, or the reference's where
    // the set has none (F32, BF16: the same bytes)
    if (fast.dot_rows) k.dot_outputs = fast.dot_outputs;
    k.dot_tile = fast.dot_tile;  // reads the same activation blocks as fast.dot_rows
    if (use_avx512() && fast.dot_rows) {  // the tiles read what fast.dot_rows reads
      if (use_amx() && amx_dot_tile(weight)) k.dot_tile = amx_dot_tile(weight);
      else if (DotTileFn wide = avx512_dot_tile(weight)) k.dot_tile = wide;
    }
    if (use_avx512() && fast.dot_rows && fast.quantize_act) {
      const InterleavedKernels il = avx512_interleaved_kernels(weight, use_amx());
      k.dot_outputs_interleaved = il.dot_outputs;
      k.dot_tile_interleaved = il.dot_tile;
      k.dot_rows_interleaved = il.dot_rows;
      k.dot_tile_vnni_interleaved = il.dot_tile_vnni;
      k.dot_planes_interleaved = il.dot_planes;
    }
    if (fast.quantize_act) {  // the fast dot reads the fast quantiser's blocks
      k.quantize_act = fast.quantize_act;
      k.act_block_elements = fast.act_block_elements;
      k.act_block_bytes = fast.act_block_bytes;
    }
  }
  if (use_avx512_bf16()) {
    if (const RowKernels bf16 = avx512_bf16_row_kernels(weight); bf16.dot_rows) return bf16;
  }
  return k;
}

constexpr uint32_t kTypeIds = 64;  // above every ggml type id (spec §2)
}  // namespace

RowKernels row_kernels(TensorType weight) {
  // Chosen once per type: matmul asks on every call, and a decode step makes hundreds of calls.
  static const auto table = [] {
    std::array<RowKernels, kTypeIds> t{};
    for (uint32_t id = 0; id < kTypeIds; ++id) {
      if (is_supported_weight_type(static_cast<TensorType>(id))) t[id] = choose(static_cast<TensorType>(id));
    }
    return t;
  }();
  const auto id = static_cast<uint32_t>(weight);
  if (id >= kTypeIds || !table[id].dot_rows) return scalar_row_kernels(weight);  // throws: unsupported
  return table[id];
}

}  // namespace infer::kernels
