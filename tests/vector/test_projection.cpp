// REDUCE: the random projection and a vector set built on it (full-size vectors in, reduced ones stored).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "vector/projection.h"
#include "vector/serialize.h"
#include "vector/vector_set.h"
#include "vector_test_util.h"

using namespace infer::vector;
using namespace infer::test;

namespace {

VectorSet reduced_set(size_t n, std::mt19937& rng, std::vector<std::vector<float>>* added = nullptr) {
  VectorSet s({.dim = 32, .projection_input_dim = 128});
  for (size_t i = 0; i < n; ++i) {
    auto v = random_vec(128, rng);
    s.add("e" + std::to_string(i), v);
    if (added) added->push_back(v);
  }
  return s;
}
}  // namespace

TEST(Projection, IsDeterministicSignedAndScaled) {
  const auto a = make_projection(100, 20), b = make_projection(100, 20);
  ASSERT_EQ(a.size(), 2000u);
  EXPECT_EQ(a, b);
  const float mag = 1.0f / std::sqrt(20.0f);
  int positive = 0;
  for (float x : a) {
    EXPECT_FLOAT_EQ(std::fabs(x), mag);
    positive += x > 0;
  }
  EXPECT_GT(positive, 800);  // the column signs mix the Hadamard pattern: neither sign dominates
  EXPECT_LT(positive, 1200);
}

TEST(Projection, RowsAreOrthogonalForPowerOfTwoInputs) {
  const auto m = make_projection(64, 16);
  for (int r = 0; r < 16; ++r)
    for (int q = 0; q < 16; ++q) {
      double dot = 0;
      for (int c = 0; c < 64; ++c) dot += double(m[r * 64 + c]) * m[q * 64 + c];
      EXPECT_NEAR(dot, r == q ? 64.0 / 16.0 : 0.0, 1e-4) << r << "," << q;
    }
}

TEST(Projection, FullSizeQueryFindsTheElementItselfFirst) {
  std::mt19937 rng(3);
  std::vector<std::vector<float>> added;
  VectorSet s = reduced_set(500, rng, &added);
  EXPECT_EQ(s.config().dim, 32u);
  EXPECT_EQ(s.input_dim(), 128u);
  for (int i = 0; i < 500; i += 50) {
    auto hits = s.search(added[i], {.count = 3});
    ASSERT_FALSE(hits.empty());
    EXPECT_EQ(*hits[0].name, "e" + std::to_string(i));
    EXPECT_GT(hits[0].score, 0.99f);
  }
  EXPECT_EQ(s.embedding("e0")->size(), 32u);  // the stored (reduced) vector
}

TEST(Projection, WrongInputDimensionIsAClearError) {
  std::mt19937 rng(4);
  VectorSet s = reduced_set(3, rng);
  try {
    s.add("x", random_vec(32, rng));
    FAIL() << "a reduced-size vector was taken as input";
  } catch (const VectorSetError& e) {
    EXPECT_NE(std::string(e.what()).find("got 32 but projection expects 128"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.search(random_vec(64, rng), {}), VectorSetError);
  EXPECT_NO_THROW(s.add("y", random_vec(32, rng), std::nullopt, 0, /*projected=*/true));
  EXPECT_THROW(VectorSet({.dim = 200, .projection_input_dim = 100}), VectorSetError);      // grows, not reduces
  EXPECT_THROW(VectorSet({.dim = 4096, .projection_input_dim = 8192}), VectorSetError);   // matrix too large
}

TEST(Projection, SerializeRoundTripKeepsTheProjection) {
  std::mt19937 rng(5);
  std::vector<std::vector<float>> added;
  VectorSet s = reduced_set(200, rng, &added);
  auto back = from_bytes(to_bytes(s));
  EXPECT_EQ(back->config().projection_input_dim, 128u);
  EXPECT_EQ(back->projection(), s.projection());
  EXPECT_EQ(record_count(*back), 202u);  // header, matrix, elements
  for (int i = 0; i < 200; i += 40) {
    auto a = s.search(added[i], {.count = 5}), b = back->search(added[i], {.count = 5});
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(*a[k].name, *b[k].name);
  }
}

TEST(Projection, LoaderRejectsATruncatedMatrix) {
  std::mt19937 rng(6);
  VectorSet s = reduced_set(2, rng);
  std::vector<std::string> records;
  save_records(s, [&](std::string_view r) { records.emplace_back(r); });
  records[1].resize(records[1].size() - 4);
  size_t next = 0;
  EXPECT_THROW(load_records(kEncodingVersion,
                            [&]() -> std::optional<std::string> {
                              if (next >= records.size()) return std::nullopt;
                              return records[next++];
                            }),
               VectorSetError);
}

TEST(Projection, Version1SetsWithoutProjectionStillLoad) {
  // Version 1 is version 2 without the header's trailing REDUCE input dimension (and no matrix record).
  std::mt19937 rng(7);
  VectorSet s({.dim = 8});
  for (int i = 0; i < 50; ++i) s.add("e" + std::to_string(i), random_vec(8, rng));
  const std::string v2 = to_bytes(s);
  uint32_t header_len;
  std::memcpy(&header_len, v2.data() + 4, 4);
  std::string v1 = v2;
  const uint32_t version = 1, shorter = header_len - 4;
  std::memcpy(v1.data(), &version, 4);
  std::memcpy(v1.data() + 4, &shorter, 4);
  v1.erase(8 + shorter, 4);
  auto back = from_bytes(v1);
  EXPECT_EQ(back->size(), 50u);
  EXPECT_EQ(back->config().projection_input_dim, 0u);
  EXPECT_EQ(to_bytes(*back), v2);
}
