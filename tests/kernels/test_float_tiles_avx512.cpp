// The AVX-512 FMA tiles of float rows (float_rows_avx512.cpp: 512-bit, and 256-bit over 32 registers)
// against the AVX2 set, bit for bit: one is chosen by a speed probe, so neither may change a single
// output wherever it runs. Both called directly on every AVX-512 CPU, whatever the probe decided.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/x86/avx512/avx512_kernels.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/quant/quant.h"
#include "kernels/matmul/row_kernels.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

using test::random_floats;
using test::type_label;

class FmaTiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!use_avx512()) GTEST_SKIP() << "no AVX-512 (F/BW/VL/VNNI), or INFER_NO_AVX512=1 / INFER_FORCE_SCALAR=1";
  }
};

DotTileFn fma512_tile(TensorType t) {
  switch (t) {
    case TensorType::F32: return avx512::dot_tile_fma_f32;
    case TensorType::F16: return avx512::dot_tile_fma_f16;
    default: return avx512::dot_tile_fma_bf16;
  }
}

DotTileFn fma256_tile(TensorType t) {
  switch (t) {
    case TensorType::F32: return avx512::dot_tile_fma256_f32;
    case TensorType::F16: return avx512::dot_tile_fma256_f16;
    default: return avx512::dot_tile_fma256_bf16;
  }
}

// The tile and the AVX2 one over n_out weight rows × n_rows activation rows, in the AVX2 set's
// activation format; each value also against the AVX2 set's dot_rows for the pair alone.
void expect_fma_tile_is_bitwise_avx2(DotTileFn tile, const char* name, TensorType t, int64_t n, int64_t n_out,
                                     int n_rows) {
  const RowKernels avx2 = avx2_row_kernels(t);
  const uint64_t row_bytes = quant_row_bytes(t, n), act_bytes = n * sizeof(float);
  const std::vector<uint8_t> w = test::random_weights(t, n_out, n, 31 + static_cast<uint32_t>(n + n_out));
  const std::vector<float> x = random_floats(n * n_rows, 37 + n_rows);
  std::vector<uint8_t> act(act_bytes * n_rows);
  for (int r = 0; r < n_rows; ++r) {
    if (avx2.quantize_act) avx2.quantize_act(x.data() + r * n, act.data() + r * act_bytes, n);
    else std::memcpy(act.data() + r * act_bytes, x.data() + r * n, act_bytes);  // F32: the rows as they are
  }
  std::vector<float> expected(n_out * n_rows), got(n_out * n_rows, -1.0f), single(n_out * n_rows);
  avx2.dot_tile(n, w.data(), row_bytes, n_out, act.data(), act_bytes, n_rows, expected.data(), n_out);
  tile(n, w.data(), row_bytes, n_out, act.data(), act_bytes, n_rows, got.data(), n_out);
  for (int r = 0; r < n_rows; ++r) {
    for (int64_t o = 0; o < n_out; ++o) {
      avx2.dot_rows(n, w.data() + o * row_bytes, act.data() + r * act_bytes, act_bytes, 1, &single[r * n_out + o], 1);
    }
  }
  const std::string label = std::string(name) + " " + type_label(t) + " n=" + std::to_string(n) + " weights=" +
                            std::to_string(n_out) + " rows=" + std::to_string(n_rows);
  EXPECT_EQ(std::memcmp(expected.data(), got.data(), got.size() * sizeof(float)), 0) << label;
  EXPECT_EQ(std::memcmp(single.data(), got.data(), got.size() * sizeof(float)), 0) << label << " (dot_rows)";
}

// Both AVX-512 tiles.
void expect_fma_tiles_are_bitwise_avx2(TensorType t, int64_t n, int64_t n_out, int n_rows) {
  expect_fma_tile_is_bitwise_avx2(fma512_tile(t), "512-bit", t, n, n_out, n_rows);
  expect_fma_tile_is_bitwise_avx2(fma256_tile(t), "256-bit", t, n, n_out, n_rows);
}

// Rows of 5 (tail only) to 2,816 elements, 16 (one BF16 step) and 2,061 (steps and a tail); 1 to 131
// weight rows (an odd last row paired with itself; sub-tiles; partial groups of pairs and of 4 rows); 1
// to 17 activation rows (every pass height and a full pass plus a partial one).
TEST_F(FmaTiles, AreBitwiseTheAvx2TileInEveryShape) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
    for (int64_t n : {5, 8, 16, 1005, 2061, 2816}) {
      for (int64_t n_out : {1, 2, 7, 70, 131}) {
        for (int n_rows : {1, 2, 3, 5, 6, 7, 8, 9, 17}) expect_fma_tiles_are_bitwise_avx2(t, n, n_out, n_rows);
      }
    }
  }
}

// Large rows: a sub-tile holds the minimum of weight rows (6 for the 512-bit tile, 1 for the 256-bit one).
TEST_F(FmaTiles, AreBitwiseTheAvx2TileOnRowsLongerThanASubTile) {
  expect_fma_tiles_are_bitwise_avx2(TensorType::F32, 40000, 13, 5);
  expect_fma_tiles_are_bitwise_avx2(TensorType::F16, 70000, 9, 3);
  expect_fma_tiles_are_bitwise_avx2(TensorType::BF16, 50003, 7, 4);
}

// The probe measures a ratio of times of equal FMA counts: 1 for full-width 512-bit FMAs, 2 for split
// ones, nothing far outside; dispatch follows the threshold.
TEST_F(FmaTiles, ProbeMeasuresAPlausibleRatio) {
  const double ratio = avx512::fma512_time_ratio();
  std::cout << "[ probe ] 512-bit / 256-bit FMA time " << ratio << ", tiles in use: " << use_avx512_fma_tiles()
            << "\n";
  RecordProperty("fma512_time_ratio", std::to_string(ratio));
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 4.0);
  const DotTileFn chosen = use_avx512_fma_tiles() ? avx512::dot_tile_fma_f16 : avx512::dot_tile_fma256_f16;
  EXPECT_EQ(avx512_dot_tile(TensorType::F16), chosen);
  EXPECT_EQ(row_kernels(TensorType::F16).dot_tile, chosen);
}

}  // namespace
}  // namespace infer::kernels
