// The tensor type table matches spec/quant-formats.md §2.
#include <gtest/gtest.h>

#include "gguf/tensor_type.h"

namespace infer::gguf {
namespace {

TEST(GgufTensorType, BlockGeometryOfCommonTypes) {
  struct Row { TensorType type; const char* name; uint32_t blk, bytes; };
  for (const Row& r : {Row{TensorType::F32, "F32", 1, 4}, Row{TensorType::F16, "F16", 1, 2},
                       Row{TensorType::Q4_0, "Q4_0", 32, 18}, Row{TensorType::Q8_0, "Q8_0", 32, 34},
                       Row{TensorType::Q8_1, "Q8_1", 32, 36}, Row{TensorType::Q4_K, "Q4_K", 256, 144},
                       Row{TensorType::Q5_K, "Q5_K", 256, 176}, Row{TensorType::Q6_K, "Q6_K", 256, 210},
                       Row{TensorType::Q8_K, "Q8_K", 256, 292}, Row{TensorType::IQ1_M, "IQ1_M", 256, 56},
                       Row{TensorType::BF16, "BF16", 1, 2}, Row{TensorType::MXFP4, "MXFP4", 32, 17},
                       Row{TensorType::NVFP4, "NVFP4", 64, 36}, Row{TensorType::Q1_0, "Q1_0", 128, 18},
                       Row{TensorType::Q2_0, "Q2_0", 64, 18}}) {
    auto t = type_traits(static_cast<uint32_t>(r.type));
    ASSERT_TRUE(t.has_value()) << r.name;
    EXPECT_EQ(t->name, r.name);
    EXPECT_EQ(t->block_elements, r.blk) << r.name;
    EXPECT_EQ(t->block_bytes, r.bytes) << r.name;
    EXPECT_EQ(type_name(r.type), r.name);
  }
}

TEST(GgufTensorType, RemovedAndUnknownIdsHaveNoTraits) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 0xFFFFFFFFu}) {
    EXPECT_FALSE(type_traits(id).has_value()) << id;
  }
  int known = 0;
  for (uint32_t id = 0; id < 64; ++id) known += type_traits(id).has_value();
  EXPECT_EQ(known, 43 - 8);
  EXPECT_EQ(type_name(static_cast<TensorType>(4)), "type4");
}

TEST(GgufTensorType, RowBytes) {
  EXPECT_EQ(row_bytes(TensorType::F32, 64), 256u);
  EXPECT_EQ(row_bytes(TensorType::Q4_K, 4096), 16u * 144u);
  EXPECT_EQ(row_bytes(TensorType::Q8_0, 64), 68u);
  EXPECT_THROW(row_bytes(TensorType::Q4_0, 48), std::invalid_argument);
  EXPECT_THROW(row_bytes(static_cast<TensorType>(31), 32), std::invalid_argument);
}

}  // namespace
}  // namespace infer::gguf
