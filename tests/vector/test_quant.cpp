#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "vector/quant.h"

using namespace infer::vector;

namespace {
std::vector<float> random_unit(size_t dim, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> v(dim);
  for (auto& x : v) x = nd(rng);
  normalize(v.data(), dim);
  return v;
}
float exact_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += double(a[i]) * b[i];
  return static_cast<float>(1 - d);
}
}  // namespace

TEST(Quant, EncodedSizes) {
  EXPECT_EQ(encoded_size(Quant::F32, 10), 40u);
  EXPECT_EQ(encoded_size(Quant::Q8, 10), 14u);
  EXPECT_EQ(encoded_size(Quant::Bin, 10), 2u);
}

TEST(Quant, RoundTripErrorIsSmall) {
  std::mt19937 rng(1);
  for (Quant q : {Quant::F32, Quant::Q8}) {
    auto v = random_unit(100, rng);
    std::vector<uint8_t> enc(encoded_size(q, 100));
    encode(q, v.data(), 100, enc.data());
    std::vector<float> back(100);
    decode(q, enc.data(), 100, back.data());
    float max_abs = 0;
    for (float x : v) max_abs = std::max(max_abs, std::fabs(x));
    for (size_t i = 0; i < 100; ++i) EXPECT_NEAR(back[i], v[i], q == Quant::F32 ? 0 : max_abs / 254 + 1e-7);
  }
}

TEST(Quant, BinKeepsSigns) {
  std::vector<float> v = {0.5f, -0.5f, 0.5f, -0.5f};
  std::vector<uint8_t> enc(1);
  encode(Quant::Bin, v.data(), 4, enc.data());
  std::vector<float> back(4);
  decode(Quant::Bin, enc.data(), 4, back.data());
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(back[i], v[i]);
}

TEST(Quant, DistancesApproximateCosine) {
  std::mt19937 rng(2);
  for (int t = 0; t < 50; ++t) {
    auto a = random_unit(64, rng), b = random_unit(64, rng);
    const float exact = exact_distance(a, b);
    for (Quant q : {Quant::F32, Quant::Q8, Quant::Bin}) {
      std::vector<uint8_t> ea(encoded_size(q, 64)), eb(encoded_size(q, 64));
      encode(q, a.data(), 64, ea.data());
      encode(q, b.data(), 64, eb.data());
      const float tol = q == Quant::F32 ? 1e-5f : q == Quant::Q8 ? 0.02f : 0.5f;
      EXPECT_NEAR(distance(q, ea.data(), eb.data(), 64), exact, tol) << quant_name(q);
    }
  }
  // Identical vectors are at distance 0 in every format.
  auto a = random_unit(33, rng);
  for (Quant q : {Quant::F32, Quant::Q8, Quant::Bin}) {
    std::vector<uint8_t> ea(encoded_size(q, 33));
    encode(q, a.data(), 33, ea.data());
    EXPECT_NEAR(distance(q, ea.data(), ea.data(), 33), 0.0f, 0.01f);
  }
}

TEST(Quant, SimdDistanceMatchesScalarReference) {
  // Odd dimensions exercise the vector loops' tails. Q8 dot products are integers: equal exactly.
  std::mt19937 rng(11);
  for (size_t dim : {1, 7, 31, 32, 33, 64, 100, 256, 300, 1027}) {
    for (Quant q : {Quant::F32, Quant::Q8, Quant::Bin}) {
      auto a = random_unit(dim, rng), b = random_unit(dim, rng);
      std::vector<uint8_t> ea(encoded_size(q, dim)), eb(encoded_size(q, dim));
      encode(q, a.data(), dim, ea.data());
      encode(q, b.data(), dim, eb.data());
      const float fast = distance_fn(q)(ea.data(), eb.data(), dim);
      const float ref = reference_distance_fn(q)(ea.data(), eb.data(), dim);
      if (q == Quant::F32)
        EXPECT_NEAR(fast, ref, 1e-5f) << "dim " << dim;
      else
        EXPECT_EQ(fast, ref) << quant_name(q) << " dim " << dim;
    }
  }
}

// Components near the float limit: the norm (here 5.2e38) is beyond float, the unit vector is exact.
TEST(Quant, NormalizeHugeComponentsInDouble) {
  std::vector<float> v = {3e38f, 3e38f, 3e38f};
  const double norm = normalize(v.data(), v.size());
  EXPECT_NEAR(norm / (3e38 * std::sqrt(3.0)), 1.0, 1e-6);
  for (float x : v) EXPECT_NEAR(x, 1 / std::sqrt(3.0f), 1e-6);
}

// What encode() writes is plausible; forged scales, components and non-unit vectors are not.
TEST(Quant, PlausibleEncoding) {
  std::mt19937 rng(3);
  for (Quant q : {Quant::F32, Quant::Q8, Quant::Bin}) {
    auto v = random_unit(33, rng);
    std::vector<uint8_t> enc(encoded_size(q, 33));
    encode(q, v.data(), 33, enc.data());
    EXPECT_TRUE(plausible_encoding(q, enc.data(), 33));
    std::vector<float> zero(33, 0.0f);
    encode(q, zero.data(), 33, enc.data());
    EXPECT_TRUE(plausible_encoding(q, enc.data(), 33));
  }
  auto v = random_unit(8, rng);
  std::vector<uint8_t> enc(encoded_size(Quant::Q8, 8));
  encode(Quant::Q8, v.data(), 8, enc.data());
  for (float scale : {std::nanf(""), INFINITY, -0.1f, 0.0f, 1e30f}) {
    auto forged = enc;
    std::memcpy(forged.data(), &scale, 4);
    EXPECT_FALSE(plausible_encoding(Quant::Q8, forged.data(), 8)) << scale;
  }
  auto forged = enc;
  forged[4] = static_cast<uint8_t>(-128);
  EXPECT_FALSE(plausible_encoding(Quant::Q8, forged.data(), 8));
  std::vector<float> f = {0.6f, 0.8f, 0.0f};
  EXPECT_TRUE(plausible_encoding(Quant::F32, reinterpret_cast<const uint8_t*>(f.data()), 3));
  f[2] = 0.5f;
  EXPECT_FALSE(plausible_encoding(Quant::F32, reinterpret_cast<const uint8_t*>(f.data()), 3));
  f[2] = std::nanf("");
  EXPECT_FALSE(plausible_encoding(Quant::F32, reinterpret_cast<const uint8_t*>(f.data()), 3));
}
