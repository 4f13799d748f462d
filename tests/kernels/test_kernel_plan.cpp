// kernel_plan.h: every (type, layout, rows) maps to a kernel that exists, named after the function
// that defines it in the file it names, and the plan follows the CPU's features and the thresholds
// of batch_rows.h. (That the kernels it picks give bitwise the reference's sums: test_matmul.cpp,
// test_interleave.cpp, test_batch_tiles.cpp, which run matmul through the plan.)
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "kernels/matmul/batch_rows.h"
#include "kernels/matmul/kernel_plan.h"
#include "kernels/quant/interleave.h"
#include "kernels/runtime/cpu_features.h"
#include "kernel_test_data.h"
#include "support/data_dirs.h"

namespace infer::kernels {
namespace {

const std::set<std::string> kFamilies = {
    "scalar",          "avx2-rows",        "avx2-streams",      "avx2-tiles",          "avx512-fma-tiles",
    "avx512-fma256-tiles", "avx512-vnni-tiles", "avx512-vnni-interleaved", "avx512-bf16-rows", "avx512-bf16-tiles",
    "amx-tiles",       "amx-planes",       "amx-bf16-rows",     "amx-bf16-tiles"};

std::string read_source(const std::string& file) {
  std::ifstream f(::infer::test::source_dir() + "/src/kernels/" + file);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST(KernelPlan, EveryPlanNamesAKernelDefinedInTheFileItNames) {
  for (TensorType t : test::kWeightTypes) {
    for (bool interleaved : {false, true}) {
      for (int64_t rows : {1, 2, 3, 4, 7, 8, 11, 12, 15, 16, 17, 31, 32, 33, 64, 96, 512}) {
        const KernelPlan p = plan_matmul(t, interleaved, rows);
        const int set = (p.rows != nullptr) + (p.outputs != nullptr) + (p.tile != nullptr);
        ASSERT_EQ(set, 1) << test::type_label(t) << " rows " << rows;
        EXPECT_EQ(p.rows != nullptr, p.call == KernelCall::kRowsByFour);
        EXPECT_EQ(p.outputs != nullptr, p.call == KernelCall::kOutputsPerRow);
        const KernelName name = kernel_name(t, p);
        EXPECT_TRUE(kFamilies.count(name.family)) << name.function << ": " << name.family;
        ASSERT_NE(name.file, nullptr) << name.function;
        const std::string source = read_source(name.file);
        ASSERT_FALSE(source.empty()) << "no src/kernels/" << name.file;
        // "avx512::dot_tile_vnni_q8_0" → "dot_tile_vnni_q8_0"; "amx::dot_rows<HardwareTiles>" → "dot_rows"
        std::string fn = name.function.substr(name.function.find("::") + 2);
        fn = fn.substr(0, fn.find('<'));
        // Defined by name, or by a macro over the type's suffix (float_rows_avx2.cpp: KERNELS(f32, ...)).
        const std::string suffix = fn.substr(fn.rfind('_') + 1);
        EXPECT_TRUE(source.find(fn + "(") != std::string::npos || source.find("(" + suffix + ",") != std::string::npos)
            << fn << " is not in " << name.file;
      }
    }
  }
}

TEST(KernelPlan, FollowsTheCpuAndTheThresholds) {
  const KernelName decode = kernel_name(TensorType::Q8_0, plan_matmul(TensorType::Q8_0, false, 1));
  if (!use_avx2()) {
    EXPECT_EQ(decode.function, "ref::dot_q8_0");
    EXPECT_EQ(plan_matmul(TensorType::Q8_0, true, 40).call, KernelCall::kRowsByFour);
    return;
  }
  EXPECT_EQ(decode.function, "avx2::dot_outputs_q8_0");
  const int64_t last_decode = batch_rows::kDecodeKernelUpTo;
  EXPECT_EQ(plan_matmul(TensorType::Q8_0, false, last_decode).call, KernelCall::kOutputsPerRow);
  EXPECT_EQ(plan_matmul(TensorType::Q8_0, false, last_decode + 1).call, KernelCall::kTile);
  if (!interleaved_kernels_available(TensorType::Q8_0)) return;
  auto q8_interleaved = [](int64_t rows) {
    return kernel_name(TensorType::Q8_0, plan_matmul(TensorType::Q8_0, true, rows)).function;
  };
  EXPECT_EQ(q8_interleaved(1), "avx512::dot_outputs_interleaved_q8_0");
  EXPECT_EQ(q8_interleaved(2), "avx512::dot_rows_interleaved_q8_0");
  if (use_amx()) {
    EXPECT_EQ(q8_interleaved(batch_rows::kVnniBeforeAmxUpTo), "avx512::dot_rows_interleaved_q8_0");
    EXPECT_EQ(q8_interleaved(batch_rows::kVnniBeforeAmxUpTo + 1), "amx::dot_tile_interleaved_q8_0");
    EXPECT_EQ(kernel_name(TensorType::Q4_K, plan_matmul(TensorType::Q4_K, true, batch_rows::kAmxPlanesFrom)).function,
              "amx::dot_planes_interleaved_q4_k");
  } else {
    EXPECT_EQ(q8_interleaved(batch_rows::kQ8_0Q4_0PassesUpTo), "avx512::dot_rows_interleaved_q8_0");
    EXPECT_EQ(q8_interleaved(batch_rows::kQ8_0Q4_0PassesUpTo + 1), "avx512::dot_tile_vnni_interleaved_q8_0");
    EXPECT_EQ(kernel_name(TensorType::Q6_K, plan_matmul(TensorType::Q6_K, true, batch_rows::kQ5KQ6KPassesUpTo + 1))
                  .function,
              "avx512::dot_tile_vnni_interleaved_q6_k");
  }
}

// The newcomer's question ("which kernel runs a Q8_0 batch of 40 rows on this CPU?") has one answer
// in describe_plans, the text `infer bench` prints.
TEST(KernelPlan, DescribeGivesEachRowCountOneKernel) {
  for (TensorType t : test::kWeightTypes) {
    for (bool interleaved : {false, true}) {
      const std::string d = describe_plans(t, interleaved);
      EXPECT_EQ(d.rfind("1", 0), 0u) << d;
      EXPECT_NE(d.find("+ rows: "), std::string::npos) << d;
      const std::string forty = kernel_name(t, plan_matmul(t, interleaved, 40)).function;
      EXPECT_NE(d.find(forty + " ("), std::string::npos) << d;
    }
  }
  EXPECT_THROW(plan_matmul(TensorType::Q8_K, false, 1), std::invalid_argument);
}

}  // namespace
}  // namespace infer::kernels
