// The batch tile kernels (RowKernels::dot_tile) against the row kernels, bit for bit (invariant 7):
// every (weight row, activation row) pair of a tile must be what dot_rows gives for that pair alone,
// across sub-tiles of weight rows, k-blocks of the row, a scalar tail and a partial group of rows.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/runtime/cpu_features.h"
#include "kernels/quant/quant.h"
#include "kernels/matmul/row_kernels.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

using test::kWeightTypes;
using test::random_floats;
using test::type_label;

// dot_tile over n_out weight rows and n_rows activation rows against dot_rows (1 row) per pair and,
// where the type has one, the decode kernel.
void expect_tile_is_bitwise_the_row_kernels(TensorType t, int64_t n, int64_t n_out, int n_rows) {
  const RowKernels k = row_kernels(t);
  const uint64_t row_bytes = quant_row_bytes(t, n), act_bytes = k.act_row_bytes(n);
  const std::vector<uint8_t> w = test::random_weights(t, n_out, n, 11 + static_cast<uint32_t>(n));
  const std::vector<float> x = random_floats(n * n_rows, 13);
  std::vector<uint8_t> act(act_bytes * n_rows);
  for (int r = 0; r < n_rows; ++r) k.quantize_act(x.data() + r * n, act.data() + r * act_bytes, n);

  std::vector<float> tile(n_out * n_rows), rows(n_out * n_rows), decode(n_out * n_rows);
  k.dot_tile(n, w.data(), row_bytes, n_out, act.data(), act_bytes, n_rows, tile.data(), n_out);
  for (int r = 0; r < n_rows; ++r) {
    for (int64_t o = 0; o < n_out; ++o) {
      k.dot_rows(n, w.data() + o * row_bytes, act.data() + r * act_bytes, act_bytes, 1, &rows[r * n_out + o], 1);
    }
    if (k.dot_outputs) k.dot_outputs(n, w.data(), row_bytes, n_out, act.data() + r * act_bytes, &decode[r * n_out]);
  }
  EXPECT_EQ(std::memcmp(tile.data(), rows.data(), tile.size() * sizeof(float)), 0)
      << type_label(t) << " n=" << n << " rows=" << n_rows;
  if (k.dot_outputs) {
    EXPECT_EQ(std::memcmp(decode.data(), rows.data(), decode.size() * sizeof(float)), 0)
        << type_label(t) << " decode, n=" << n;
  }
}

class BatchTiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!use_avx2()) GTEST_SKIP() << "no AVX2/FMA/F16C, or INFER_FORCE_SCALAR=1";
  }
};

// 70 weight rows: more than one sub-tile; 2,816 elements: k-blocks with a partial last one (and for
// 32-element blocks 2,848: an odd block count, the last block without its pair); 1..17 rows: full and
// partial row groups of every tile height, on either side of the K-quant tiles' thresholds; 61 rows
// of 2,816 elements: more than the ~160 KiB of activation rows that the integer tiles take per pass
// (block_groups_avx2.h, k_tile_avx2.h).
TEST_F(BatchTiles, EveryPairIsBitwiseTheRowKernel) {
  int tested = 0;
  for (TensorType t : kWeightTypes) {
    if (!row_kernels(t).dot_tile || (use_amx() && amx_dot_tile(t))) continue;  // AMX: test_matmul.cpp
    ++tested;
    for (int64_t n : {256, 2816, 2848}) {
      if (n % block_elements(t) != 0) continue;
      for (int n_rows : {1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 17}) expect_tile_is_bitwise_the_row_kernels(t, n, 70, n_rows);
    }
    expect_tile_is_bitwise_the_row_kernels(t, 2816, 70, 61);
  }
  if (tested == 0) GTEST_SKIP() << "no AVX2 tile kernels in use";
}

// Float rows of any length: the 8-element steps and the scalar tail after the last 32-element step.
TEST_F(BatchTiles, FloatRowsWithTailsAreBitwiseTheRowKernel) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
    if (!row_kernels(t).dot_tile) continue;
    for (int64_t n : {5, 1005, 2061}) expect_tile_is_bitwise_the_row_kernels(t, n, 9, 4);
  }
}

}  // namespace
}  // namespace infer::kernels
