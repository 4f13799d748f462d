// f16 / bf16 conversions against the exact rules of spec §3 and §8 (and the F16C hardware).
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include "kernels/runtime/cpu_features.h"
#include "kernels/quant/quant.h"

namespace infer::kernels {
namespace {

__attribute__((target("f16c"))) uint16_t hardware_f32_to_f16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(Half, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    if (nan) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_EQ(f32_to_f16(f), (h & 0x8000) | 0x7E00) << h;
    } else {
      ASSERT_EQ(f32_to_f16(f), h) << h;
    }
  }
}

TEST(Half, NanPayloadIsShiftedAndQuieted) {
  EXPECT_EQ(std::bit_cast<uint32_t>(f16_to_f32(0x7C01)), 0x7FC02000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(f16_to_f32(0xFC00)), 0xFF800000u);
}

TEST(Half, RoundsToNearestEvenIncludingSubnormalsAndOverflow) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // tie between 65504 (odd) and inf: goes to inf
  EXPECT_EQ(f32_to_f16(-1e9f), 0xFC00);
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);        // tie to even (0)
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);    // tie to even (2)
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3C00);  // tie to even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(0x1p-14f - 0x1p-26f), 0x0400);  // rounds up into the smallest normal
}

TEST(Half, MatchesF16cHardwareOnRandomBitPatterns) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C";
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;  // payload handling differs by design (§8.1)
    ASSERT_EQ(f32_to_f16(f), hardware_f32_to_f16(f)) << std::bit_cast<uint32_t>(f);
  }
  std::normal_distribution<float> normal(0, 1e-3f);
  for (int i = 0; i < 200000; ++i) {
    const float f = normal(rng);
    ASSERT_EQ(f32_to_f16(f), hardware_f32_to_f16(f)) << f;
  }
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsNanQuiet) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808001u)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7F7FFFFFu)), 0x7F80);  // max float rounds to inf
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7F800001u)), 0x7FC0);  // signalling NaN made quiet
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00000001u)), 0x0000);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);  // subnormals not flushed
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    EXPECT_EQ(std::bit_cast<uint32_t>(f), h << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), h);
    }
  }
}

}  // namespace
}  // namespace infer::kernels
