// kernel_report.h: the CPU model and the kernel family names a benchmark report carries.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "kernels/runtime/cpu_features.h"
#include "kernels/matmul/kernel_report.h"
#include "kernels/matmul/row_kernels.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

TEST(KernelReport, CpuModelNamesTheFamily) {
  const std::string m = cpu_model();
  EXPECT_FALSE(m.empty());
  EXPECT_NE(m.find("(family "), std::string::npos) << m;
}

// The float rows and the Q8_0 activation formats have AVX2 batch tiles on every AVX2 CPU (Q8_0 and Q4_0
// AVX-512 VNNI ones where the CPU has it, float rows 512-bit FMA ones where the probe finds them at full
// width); the names follow the kernels row_kernels chose.
TEST(KernelReport, FamiliesFollowTheRunTimeChoice) {
  for (TensorType t : test::kWeightTypes) {
    const KernelFamilies f = kernel_families(t, false);
    const RowKernels k = row_kernels(t);
    if (!use_avx2()) {
      EXPECT_STREQ(f.batch, "scalar") << test::type_label(t);
      continue;
    }
    if (use_avx512_bf16() && avx512_bf16_row_kernels(t).dot_rows) continue;  // below
    if (use_amx_bf16() && amx_bf16_row_kernels(t).dot_rows) continue;        // below
    EXPECT_STREQ(f.decode, k.dot_outputs ? "avx2-streams" : "avx2-rows") << test::type_label(t);
    const bool amx = use_amx() && amx_dot_tile(t);
    const bool wide = !amx && use_avx512() && avx512_dot_tile(t);
    const bool float_rows = t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16;
    const char* fma_family = use_avx512_fma_tiles() ? "avx512-fma-tiles" : "avx512-fma256-tiles";
    const char* wide_family = float_rows ? fma_family : "avx512-vnni-tiles";
    EXPECT_STREQ(f.batch, amx ? "amx-tiles" : wide ? wide_family : k.dot_tile ? "avx2-tiles" : "avx2-rows")
        << test::type_label(t);
  }
  if (use_avx2()) {
    // float rows take the 512-bit FMA tile where the probe found full-width FMAs, else on AVX-512 the
    // 256-bit one over 32 registers
    const char* float_tiles = use_avx512_fma_tiles() ? "avx512-fma-tiles"
                              : use_avx512()         ? "avx512-fma256-tiles"
                                                     : "avx2-tiles";
    for (TensorType t : {TensorType::F32, TensorType::F16}) {
      EXPECT_STREQ(kernel_families(t, false).batch, float_tiles) << test::type_label(t);
    }
    for (TensorType t : {TensorType::Q5_0, TensorType::Q5_1}) {
      EXPECT_STREQ(kernel_families(t, false).batch, use_avx512() ? "avx512-vnni-tiles" : "avx2-tiles")
          << test::type_label(t);
    }
    const KernelFamilies bf16 = kernel_families(TensorType::BF16, false);
    if (use_amx_bf16()) {  // the AMX-BF16 set for every shape
      EXPECT_STREQ(bf16.batch, "amx-bf16-tiles");
      EXPECT_STREQ(bf16.decode, "amx-bf16-rows");
    } else {
      EXPECT_STREQ(bf16.batch, use_avx512_bf16() ? "avx512-bf16-tiles" : float_tiles);
      EXPECT_STREQ(bf16.decode, use_avx512_bf16() ? "avx512-bf16-rows" : "avx2-streams");
    }
    // Q8_0 and Q4_0 batches take AVX-512 VNNI where the CPU has it
    for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0}) {
      EXPECT_STREQ(kernel_families(t, false).batch, use_avx512() ? "avx512-vnni-tiles" : "avx2-tiles")
          << test::type_label(t);
    }
  }
}

TEST(KernelReport, RejectsUnsupportedTypes) {
  EXPECT_THROW(kernel_families(static_cast<TensorType>(63), false), std::invalid_argument);
}

}  // namespace
}  // namespace infer::kernels
