// The table of kernel_table.h. It only takes the kernels' addresses, so it is built for the baseline
// x86-64; the kernels run only where the plan (kernel_plan.cpp) found their instruction set.
#include "kernels/matmul/kernel_table.h"

#include <stdexcept>
#include <string>

#include "kernels/quant/blocks.h"
#include "kernels/quant/reference_kernels.h"
#include "kernels/x86/amx/amx_kernels.h"
#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/x86/avx512/avx512_kernels.h"

namespace infer::kernels {

namespace {
template <float (*Dot)(const void*, const void*, int64_t)>
void scalar_dot_rows(int64_t n, const void* w_row, const uint8_t* act, uint64_t act_stride, int n_rows,
                     float* out, int64_t out_stride) {
  for (int r = 0; r < n_rows; ++r) out[r * out_stride] = Dot(w_row, act + r * act_stride, n);
}

using T = TensorType;
constexpr RowKernels kNoSet{nullptr, nullptr, 1, 0};

// Columns: type, scalar, AVX2 set, AVX-512 VNNI tile, FMA tile, FMA256 tile, interleaved decode,
// interleaved batch, interleaved tile, AMX tile, AMX interleaved tile, AMX planes, AVX-512 BF16 set, files.
constexpr const char* kFloatAvx2 = "x86/avx2/float_rows_avx2.cpp";
constexpr const char* kFloatAvx512 = "x86/avx512/float_rows_avx512.cpp";
constexpr const char* kBlock32Avx512 = "x86/avx512/q8_0_q4_0_q5_0_q5_1_avx512.cpp";
const KernelTableRow kTable[] = {
    {T::F32, scalar_dot_rows<ref::dot_f32>,
     {avx2::dot_rows_f32, nullptr, 1, 4, avx2::dot_outputs_f32, avx2::dot_tile_f32},
     nullptr, avx512::dot_tile_fma_f32, avx512::dot_tile_fma256_f32, nullptr, nullptr, nullptr, nullptr, nullptr,
     nullptr, kNoSet, {"quant/float_rows.cpp", kFloatAvx2, kFloatAvx512, nullptr, nullptr, nullptr}},
    {T::F16, scalar_dot_rows<ref::dot_f16>,
     {avx2::dot_rows_f16, avx2::quantize_act_f16_as_f32, 1, 4, avx2::dot_outputs_f16, avx2::dot_tile_f16},
     nullptr, avx512::dot_tile_fma_f16, avx512::dot_tile_fma256_f16, nullptr, nullptr, nullptr, nullptr, nullptr,
     nullptr, kNoSet, {"quant/float_rows.cpp", kFloatAvx2, kFloatAvx512, nullptr, nullptr, nullptr}},
    {T::BF16, scalar_dot_rows<ref::dot_bf16>,
     {avx2::dot_rows_bf16, avx2::quantize_act_bf16_as_f32, 1, 4, avx2::dot_outputs_bf16, avx2::dot_tile_bf16},
     nullptr, avx512::dot_tile_fma_bf16, avx512::dot_tile_fma256_bf16, nullptr, nullptr, nullptr, nullptr, nullptr,
     nullptr,
     {avx512::dot_rows_bf16, avx512::quantize_act_bf16, 1, 2, avx512::dot_outputs_bf16, avx512::dot_tile_bf16},
     {"quant/float_rows.cpp", kFloatAvx2, kFloatAvx512, nullptr, nullptr, "x86/amxbf16/bf16_rows_amxbf16.cpp"}},
    {T::Q8_0, scalar_dot_rows<ref::dot_q8_0>,
     {avx2::dot_rows_q8_0, avx2::quantize_act_q8_0f, kQK0, sizeof(BlockQ8_0F), avx2::dot_outputs_q8_0,
      avx2::dot_tile_q8_0},
     avx512::dot_tile_vnni_q8_0, nullptr, nullptr, avx512::dot_outputs_interleaved_q8_0,
     avx512::dot_rows_interleaved_q8_0, avx512::dot_tile_vnni_interleaved_q8_0, amx::dot_tile_q8_0,
     amx::dot_tile_interleaved_q8_0, nullptr, kNoSet,
     {"quant/q8_0.cpp", "x86/avx2/q8_0_q4_0_avx2.cpp", kBlock32Avx512, "x86/avx512/q8_0_q4_0_interleaved_avx512.cpp",
      kBlock32Avx512, "x86/amx/q8_0_q4_0_amx.cpp"}},
    {T::Q4_0, scalar_dot_rows<ref::dot_q4_0>,
     {avx2::dot_rows_q4_0, avx2::quantize_act_q8_0f, kQK0, sizeof(BlockQ8_0F), avx2::dot_outputs_q4_0,
      avx2::dot_tile_q4_0},
     avx512::dot_tile_vnni_q4_0, nullptr, nullptr, avx512::dot_outputs_interleaved_q4_0,
     avx512::dot_rows_interleaved_q4_0, avx512::dot_tile_vnni_interleaved_q4_0, amx::dot_tile_q4_0,
     amx::dot_tile_interleaved_q4_0, nullptr, kNoSet,
     {"quant/q4_0.cpp", "x86/avx2/q8_0_q4_0_avx2.cpp", kBlock32Avx512, "x86/avx512/q8_0_q4_0_interleaved_avx512.cpp",
      kBlock32Avx512, "x86/amx/q8_0_q4_0_amx.cpp"}},
    {T::Q5_0, scalar_dot_rows<ref::dot_q5_0>,
     {avx2::dot_rows_q5_0, avx2::quantize_act_q8_0f, kQK0, sizeof(BlockQ8_0F), avx2::dot_outputs_q5_0,
      avx2::dot_tile_q5_0},
     avx512::dot_tile_vnni_q5_0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, kNoSet,
     {"quant/q5_0.cpp", "x86/avx2/q5_0_q5_1_avx2.cpp", kBlock32Avx512, nullptr, nullptr, nullptr}},
    {T::Q5_1, scalar_dot_rows<ref::dot_q5_1>,
     {avx2::dot_rows_q5_1, avx2::quantize_act_q8_1f, kQK0, sizeof(BlockQ8_1F), avx2::dot_outputs_q5_1,
      avx2::dot_tile_q5_1},
     avx512::dot_tile_vnni_q5_1, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, kNoSet,
     {"quant/q5_1.cpp", "x86/avx2/q5_0_q5_1_avx2.cpp", kBlock32Avx512, nullptr, nullptr, nullptr}},
    {T::Q4_K, scalar_dot_rows<ref::dot_q4_k>,
     {avx2::dot_rows_q4_k, avx2::quantize_act_q8_k, kQKK, sizeof(BlockQ8_K), avx2::dot_outputs_q4_k,
      avx2::dot_tile_q4_k},
     nullptr, nullptr, nullptr, avx512::dot_outputs_interleaved_q4_k, avx512::dot_rows_interleaved_q4_k,
     avx512::dot_tile_vnni_interleaved_q4_k, amx::dot_tile_q4_k, amx::dot_tile_interleaved_q4_k,
     amx::dot_planes_interleaved_q4_k, kNoSet,
     {"quant/q4_k.cpp", "x86/avx2/q4_k_q5_k_avx2.cpp", nullptr, "x86/avx512/q4_k_q5_k_avx512.cpp",
      "x86/avx512/q4_k_q5_k_avx512.cpp", "x86/amx/q4_k_amx.cpp"}},
    {T::Q5_K, scalar_dot_rows<ref::dot_q5_k>,  // no AVX2 decode streams; no AMX: VNNI for every batch
     {avx2::dot_rows_q5_k, avx2::quantize_act_q8_k, kQKK, sizeof(BlockQ8_K), nullptr, avx2::dot_tile_q5_k},
     nullptr, nullptr, nullptr, avx512::dot_outputs_interleaved_q5_k, avx512::dot_rows_interleaved_q5_k,
     avx512::dot_tile_vnni_interleaved_q5_k, nullptr, nullptr, nullptr, kNoSet,
     {"quant/q5_k.cpp", "x86/avx2/q4_k_q5_k_avx2.cpp", nullptr, "x86/avx512/q4_k_q5_k_avx512.cpp",
      "x86/avx512/q4_k_q5_k_avx512.cpp", nullptr}},
    {T::Q6_K, scalar_dot_rows<ref::dot_q6_k>,
     {avx2::dot_rows_q6_k, avx2::quantize_act_q8_k, kQKK, sizeof(BlockQ8_K), avx2::dot_outputs_q6_k,
      avx2::dot_tile_q6_k},
     nullptr, nullptr, nullptr, avx512::dot_outputs_interleaved_q6_k, avx512::dot_rows_interleaved_q6_k,
     avx512::dot_tile_vnni_interleaved_q6_k, amx::dot_tile_q6_k, amx::dot_tile_interleaved_q6_k, nullptr, kNoSet,
     {"quant/q6_k.cpp", "x86/avx2/q6_k_avx2.cpp", nullptr, "x86/avx512/q6_k_avx512.cpp", "x86/avx512/q6_k_avx512.cpp",
      "x86/amx/q6_k_amx.cpp"}},
};
}  // namespace

const KernelTableRow* find_kernel_table_row(TensorType weight) {
  for (const KernelTableRow& row : kTable) {
    if (row.type == weight) return &row;
  }
  return nullptr;
}

const KernelTableRow& kernel_table_row(TensorType weight) {
  if (const KernelTableRow* row = find_kernel_table_row(weight)) return *row;
  throw std::invalid_argument("matmul: unsupported weight type id " + std::to_string(static_cast<uint32_t>(weight)));
}

}  // namespace infer::kernels
