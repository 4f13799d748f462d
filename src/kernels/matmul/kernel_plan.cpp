// kernel_plan.h: the choice, then the names of what it chose (from the kernel table's columns).
#include "kernels/matmul/kernel_plan.h"

#include <cctype>

#include "kernels/matmul/batch_rows.h"
#include "kernels/matmul/kernel_table.h"
#include "kernels/runtime/cpu_features.h"

namespace infer::kernels {

namespace {
// The most rows the interleaved VNNI kernel takes in passes before its tile (no AMX for the type).
int64_t interleaved_passes_up_to(TensorType weight) {
  switch (weight) {
    case TensorType::Q8_0: case TensorType::Q4_0: return batch_rows::kQ8_0Q4_0PassesUpTo;
    case TensorType::Q4_K: return batch_rows::kQ4KPassesUpTo;
    default: return batch_rows::kQ5KQ6KPassesUpTo;
  }
}

// The fewest rows the AVX2 K-quant register tiles take; 2 (every batch) for every other tile.
int64_t tile_from(const RowKernels& k, TensorType weight) {
  if (k.dot_tile != kernel_table_row(weight).avx2.dot_tile) return 2;
  switch (weight) {
    case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K: return batch_rows::kAvx2KTileFrom;
    default: return 2;
  }
}

KernelPlan tile(DotTileFn f) { return {KernelCall::kTile, nullptr, nullptr, f}; }
}  // namespace

KernelPlan plan_matmul(const RowKernels& k, TensorType weight, bool interleaved, int64_t rows) {
  if (interleaved && k.dot_outputs_interleaved) {
    if (rows == 1) return {KernelCall::kOutputsPerRow, nullptr, k.dot_outputs_interleaved, nullptr};
    if (k.dot_tile_interleaved && rows > batch_rows::kVnniBeforeAmxUpTo) return tile(k.dot_tile_interleaved);
    if (k.dot_planes_interleaved && rows >= batch_rows::kAmxPlanesFrom && rows <= batch_rows::kVnniBeforeAmxUpTo) {
      return tile(k.dot_planes_interleaved);
    }
    if (k.dot_tile_vnni_interleaved && rows > interleaved_passes_up_to(weight)) return tile(k.dot_tile_vnni_interleaved);
    return tile(k.dot_rows_interleaved);
  }
  if (rows <= batch_rows::kDecodeKernelUpTo && k.dot_outputs) {
    return {KernelCall::kOutputsPerRow, nullptr, k.dot_outputs, nullptr};
  }
  if (rows > 1 && k.dot_tile && rows >= tile_from(k, weight)) return tile(k.dot_tile);
  return {KernelCall::kRowsByFour, k.dot_rows, nullptr, nullptr};
}

KernelPlan plan_matmul(TensorType weight, bool interleaved, int64_t rows) {
  return plan_matmul(row_kernels(weight), weight, interleaved, rows);
}

KernelName kernel_name(TensorType weight, const KernelPlan& plan) {
  const KernelTableRow& row = kernel_table_row(weight);
  std::string t(gguf::type_name(weight));
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const void* f = plan.rows ? reinterpret_cast<const void*>(plan.rows)
                  : plan.outputs ? reinterpret_cast<const void*>(plan.outputs)
                                 : reinterpret_cast<const void*>(plan.tile);
  auto is = [f](auto fn) { return fn && reinterpret_cast<const void*>(fn) == f; };
  const KernelTableRow::Files& files = row.files;
  if (is(row.scalar_rows)) return {"ref::dot_" + t, "scalar", files.ref};
  if (is(row.avx2.dot_rows)) return {"avx2::dot_rows_" + t, "avx2-rows", files.avx2};
  if (is(row.avx2.dot_outputs)) return {"avx2::dot_outputs_" + t, "avx2-streams", files.avx2};
  if (is(row.avx2.dot_tile)) return {"avx2::dot_tile_" + t, "avx2-tiles", files.avx2};
  if (is(row.avx512_vnni_tile)) return {"avx512::dot_tile_vnni_" + t, "avx512-vnni-tiles", files.avx512_tile};
  if (is(row.avx512_fma_tile)) return {"avx512::dot_tile_fma_" + t, "avx512-fma-tiles", files.avx512_tile};
  if (is(row.avx512_fma256_tile)) return {"avx512::dot_tile_fma256_" + t, "avx512-fma256-tiles", files.avx512_tile};
  if (is(row.interleaved_decode)) {
    return {"avx512::dot_outputs_interleaved_" + t, "avx512-vnni-interleaved", files.interleaved};
  }
  if (is(row.interleaved_rows)) return {"avx512::dot_rows_interleaved_" + t, "avx512-vnni-interleaved", files.interleaved};
  if (is(row.interleaved_tile)) {
    return {"avx512::dot_tile_vnni_interleaved_" + t, "avx512-vnni-interleaved", files.interleaved_tile};
  }
  if (is(row.amx_tile)) return {"amx::dot_tile_" + t, "amx-tiles", files.amx};
  if (is(row.amx_interleaved_tile)) return {"amx::dot_tile_interleaved_" + t, "amx-tiles", files.amx};
  if (is(row.amx_interleaved_planes)) return {"amx::dot_planes_interleaved_" + t, "amx-planes", files.amx};
  constexpr const char* kAvx512Bf16 = "x86/avx512bf16/float_rows_avx512bf16.cpp";
  if (is(row.avx512_bf16.dot_rows)) return {"avx512::dot_rows_bf16", "avx512-bf16-rows", kAvx512Bf16};
  if (is(row.avx512_bf16.dot_outputs)) return {"avx512::dot_outputs_bf16", "avx512-bf16-rows", kAvx512Bf16};
  if (is(row.avx512_bf16.dot_tile)) return {"avx512::dot_tile_bf16", "avx512-bf16-tiles", kAvx512Bf16};
  if (weight == TensorType::BF16) {
    const RowKernels amx_bf16 = amx_bf16_row_kernels(weight);  // the set's addresses; nothing runs
    if (is(amx_bf16.dot_rows)) return {"amx::dot_rows<HardwareTiles>", "amx-bf16-rows", files.amx};
    if (is(amx_bf16.dot_outputs)) return {"amx::dot_outputs<HardwareTiles>", "amx-bf16-rows", files.amx};
    if (is(amx_bf16.dot_tile)) return {"amx::dot<HardwareTiles>", "amx-bf16-tiles", files.amx};
  }
  return {"(unnamed)", "unknown", "?"};
}

std::string describe_plans(TensorType weight, bool interleaved) {
  constexpr int64_t kMaxShown = 1024;
  std::string out;
  int64_t first = 1;
  KernelName current = kernel_name(weight, plan_matmul(weight, interleaved, 1));
  for (int64_t rows = 2; rows <= kMaxShown + 1; ++rows) {
    const bool end = rows > kMaxShown;
    const KernelName next = end ? KernelName{} : kernel_name(weight, plan_matmul(weight, interleaved, rows));
    if (!end && next.function == current.function) continue;
    if (!out.empty()) out += "; ";
    const int64_t last = rows - 1;
    out += first == last ? std::to_string(first) + (first == 1 ? " row" : " rows")
           : end         ? std::to_string(first) + "+ rows"
                         : std::to_string(first) + "-" + std::to_string(last) + " rows";
    out += ": " + current.function + " (" + (current.file ? current.file : "?") + ")";
    first = rows;
    current = next;
  }
  return out;
}

}  // namespace infer::kernels
