// The scalar references of quant.h on random data: round-trip error per format, the writers'
// documented rules, and dot_ref against the dot product of the dequantised rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/quant/blocks.h"
#include "kernels/quant/quant.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

using test::kWeightTypes;
using test::random_floats;
using test::type_label;

// Relative RMS error of a quantise → dequantise round trip (4-bit formats ~0.1, 8-bit ~0.005).
double round_trip_rel_rms(TensorType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(quant_row_bytes(t, x.size()));
  std::vector<float> back(x.size());
  quantize_row(t, x.data(), q.data(), x.size());
  dequantize_row(t, q.data(), back.data(), x.size());
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (x[i] - back[i]) * (x[i] - back[i]);
    ref += x[i] * x[i];
  }
  return std::sqrt(err / ref);
}

TEST(QuantReference, RoundTripErrorIsWithinEachFormatsPrecision) {
  const std::vector<float> x = random_floats(4096, 7);
  const struct { TensorType t; double max_rel; } cases[] = {
      {TensorType::F32, 0.0},    {TensorType::F16, 1e-3},   {TensorType::BF16, 5e-3},
      {TensorType::Q8_0, 0.01},  {TensorType::Q8_K, 0.03},  {TensorType::Q6_K, 0.04},
      {TensorType::Q5_K, 0.08},  {TensorType::Q4_0, 0.15},  {TensorType::Q4_K, 0.15},
      {TensorType::Q5_0, 0.08},  {TensorType::Q5_1, 0.08},
  };
  for (const auto& c : cases) {
    const double e = round_trip_rel_rms(c.t, x);
    EXPECT_LE(e, c.max_rel) << type_label(c.t);
    if (c.t != TensorType::F32) {
      EXPECT_GT(e, 0.0) << type_label(c.t);
    }
  }
}

TEST(QuantReference, Q8_0WriterUsesAmaxOver127AndRoundsHalfAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1 exactly
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 3.5f;
  BlockQ8_0 b;
  quantize_row(TensorType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 4);
  // The activation rule rounds ties to even instead (llama.cpp's AVX2 path, §7.2).
  quantize_activation_row(TensorType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], -2);
  EXPECT_EQ(b.qs[3], 4);
}

TEST(QuantReference, Q4_0WriterMapsLargestMagnitudeToMinus8) {
  std::vector<float> x = random_floats(32, 3);
  x[5] = 10.0f;
  BlockQ4_0 b;
  quantize_row(TensorType::Q4_0, x.data(), &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), f16_to_f32(f32_to_f16(-10.0f / 8)));
  EXPECT_EQ(b.qs[5] & 0x0F, 0);  // code 0 = −8·d = +10
}

// One block laid out by hand from §4.3: qs[j] = j | (15 − j) << 4, qh bytes 0x01 0x80 0x00 0xFF, so
// bit k of the little-endian u32 (the fifth bit of element k) is set for k = 0, 15 and 24..31.
void fill_q5_codes(uint8_t* qs, uint8_t* qh) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const uint8_t bits[4] = {0x01, 0x80, 0x00, 0xFF};
  std::memcpy(qh, bits, 4);
}

int spec_q5_code(int k) {
  const int nibble = k < 16 ? k : 15 - (k - 16);
  const bool high = k == 0 || k == 15 || k >= 24;
  return nibble + (high ? 16 : 0);
}

TEST(QuantReference, Q5_0DequantisesTheFifthBitFromQh) {
  BlockQ5_0 b;
  b.d = f32_to_f16(0.5f);
  fill_q5_codes(b.qs, b.qh);
  float out[32];
  dequantize_row(TensorType::Q5_0, &b, out, 32);
  for (int k = 0; k < 32; ++k) EXPECT_EQ(out[k], (spec_q5_code(k) - 16) * 0.5f) << k;
  EXPECT_EQ(out[0], 0.0f);     // code 16
  EXPECT_EQ(out[15], 7.5f);    // code 31
  EXPECT_EQ(out[16], -0.5f);   // code 15
  EXPECT_EQ(out[23], -4.0f);   // code 8
  EXPECT_EQ(out[24], 3.5f);    // code 23
}

TEST(QuantReference, Q5_1DequantisesCodeTimesScalePlusMin) {
  BlockQ5_1 b;
  b.d = f32_to_f16(0.25f);
  b.m = f32_to_f16(-1.0f);
  fill_q5_codes(b.qs, b.qh);
  float out[32];
  dequantize_row(TensorType::Q5_1, &b, out, 32);
  for (int k = 0; k < 32; ++k) EXPECT_EQ(out[k], spec_q5_code(k) * 0.25f - 1.0f) << k;
  EXPECT_EQ(out[15], 6.75f);   // code 31
  EXPECT_EQ(out[16], 2.75f);   // code 15
}

TEST(QuantReference, Q5_0WriterMapsLargestMagnitudeToMinus16) {
  std::vector<float> x = random_floats(32, 3);
  x[20] = 10.0f;
  BlockQ5_0 b;
  quantize_row(TensorType::Q5_0, x.data(), &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), f16_to_f32(f32_to_f16(-10.0f / 16)));
  EXPECT_EQ(b.qs[4] >> 4, 0);       // element 20: the high nibble of byte 4
  EXPECT_EQ((b.qh[2] >> 4) & 1, 0);  // and bit 20 of qh: code 0 = −16·d = +10
}

TEST(QuantReference, Q5_1WriterMapsMinToCode0AndMaxToCode31) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = -2.0f + i * (3.1f / 31);  // min −2, max 1.1 at element 31
  BlockQ5_1 b;
  quantize_row(TensorType::Q5_1, x.data(), &b, 32);
  EXPECT_EQ(f16_to_f32(b.m), -2.0f);
  EXPECT_EQ(f16_to_f32(b.d), f16_to_f32(f32_to_f16((x[31] - x[0]) / 31)));
  float back[32];
  dequantize_row(TensorType::Q5_1, &b, back, 32);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(back[i], x[i], 0.05f) << i;  // step 0.1, f16 scale
  EXPECT_EQ(b.qs[0] & 0x0F, 0);
  EXPECT_EQ(b.qh[0] & 1, 0);
  EXPECT_EQ(b.qs[15] >> 4, 15);      // element 31: code 31
  EXPECT_EQ((b.qh[3] >> 7) & 1, 1);
}

TEST(QuantReference, Q8_KCodesLargestMagnitudeAsMinus127WithNegativeScaleAndBsums) {
  std::vector<float> x = random_floats(256, 5);
  x[100] = 20.0f;
  BlockQ8_K b;
  quantize_row(TensorType::Q8_K, x.data(), &b, 256);
  EXPECT_EQ(b.qs[100], -127);
  EXPECT_LT(b.d, 0.0f);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
    EXPECT_EQ(b.bsums[g], sum);
  }
  std::vector<float> zeros(256, 0.0f);
  quantize_row(TensorType::Q8_K, zeros.data(), &b, 256);
  EXPECT_EQ(b.d, 0.0f);
  for (int g = 0; g < 16; ++g) EXPECT_EQ(b.bsums[g], 0);
}

TEST(QuantReference, KQuantWritersProduceSelfConsistentBlocksForDegenerateInput) {
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    for (float v : {0.0f, 1.0f, -3.0f}) {
      std::vector<float> x(256, v), back(256);
      std::vector<uint8_t> q(quant_row_bytes(t, 256));
      quantize_row(t, x.data(), q.data(), 256);
      dequantize_row(t, q.data(), back.data(), 256);
      for (int i = 0; i < 256; ++i) ASSERT_NEAR(back[i], v, std::fabs(v) * 0.05 + 1e-6) << type_label(t);
    }
  }
}

TEST(QuantReference, DotRefEqualsDotOfDequantisedRows) {
  const int64_t n = 1024;
  for (TensorType t : kWeightTypes) {
    const std::vector<float> wf = random_floats(n, 11, 0.05f), xf = random_floats(n, 12);
    std::vector<uint8_t> w(quant_row_bytes(t, n)), a(activation_bytes(t, n));
    quantize_row(t, wf.data(), w.data(), n);
    quantize_activation_row(t, xf.data(), a.data(), n);
    std::vector<float> wd(n), ad(n);
    dequantize_row(t, w.data(), wd.data(), n);
    dequantize_row(activation_type(t), a.data(), ad.data(), n);
    double expect = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
      expect += static_cast<double>(wd[i]) * ad[i];
      magnitude += std::fabs(static_cast<double>(wd[i]) * ad[i]);
    }
    EXPECT_NEAR(dot_ref(t, w.data(), a.data(), n), expect, 1e-5 * magnitude) << type_label(t);
  }
}

TEST(QuantReference, RejectsRowsThatAreNotWholeBlocks) {
  std::vector<float> x(300);
  std::vector<uint8_t> q(1024);
  EXPECT_THROW(quantize_row(TensorType::Q4_K, x.data(), q.data(), 300), std::invalid_argument);
  EXPECT_THROW(dequantize_row(TensorType::Q8_0, q.data(), x.data(), 33), std::invalid_argument);
  EXPECT_THROW(activation_type(TensorType::Q2_K), std::invalid_argument);
  EXPECT_FALSE(is_supported_weight_type(TensorType::Q4_1));
}

}  // namespace
}  // namespace infer::kernels
