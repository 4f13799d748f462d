// matmul against matmul_ref for every weight type, and invariant 7: each output is bitwise the same
// whatever the batch size, the row's place in the batch and the thread count.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

using test::kWeightTypes;
using test::random_floats;
using test::type_label;

struct Problem {
  TensorType type;
  int64_t n_in, n_out;
  std::vector<uint8_t> w;
  WeightMatrix matrix() const { return {type, w.data(), n_in, n_out, quant_row_bytes(type, n_in)}; }
};

Problem make_problem(TensorType t, int64_t n_in, int64_t n_out) {
  return {t, n_in, n_out, test::random_weights(t, n_out, n_in, 7 + static_cast<uint32_t>(t))};
}

// Runs matmul on rows [first, first + count) of x as one batch.
std::vector<float> run(const Problem& p, const std::vector<float>& x, int64_t first, int64_t count, int threads) {
  ThreadPool pool(threads);
  MatmulScratch scratch;
  std::vector<float> y(count * p.n_out);
  matmul(p.matrix(), x.data() + first * p.n_in, count, p.n_in, y.data(), p.n_out, pool, scratch);
  return y;
}

TEST(Matmul, MatchesReferenceForEveryType) {
  const int64_t n_in = 512, n_out = 70, rows = 6;
  const std::vector<float> x = random_floats(rows * n_in, 3);
  for (TensorType t : kWeightTypes) {
    const Problem p = make_problem(t, n_in, n_out);
    const std::vector<float> y = run(p, x, 0, rows, 2);
    std::vector<float> ref(rows * n_out);
    matmul_ref(p.matrix(), x.data(), rows, n_in, ref.data(), n_out);
    double max_abs_ref = 0;
    for (float v : ref) max_abs_ref = std::fmax(max_abs_ref, std::fabs(v));
    for (size_t i = 0; i < y.size(); ++i) {
      // Both paths quantise activations identically; only the f32 summation order differs.
      ASSERT_NEAR(y[i], ref[i], 1e-5 * max_abs_ref * 8) << type_label(t) << " at " << i;
    }
  }
}

TEST(Matmul, OutputIsBitwiseIndependentOfBatchPositionAndThreads) {
  const int64_t n_in = 512, n_out = 67, rows = 64;  // 67 outputs: uneven thread shares and tiles
  const std::vector<float> x = random_floats(rows * n_in, 5);
  for (TensorType t : kWeightTypes) {
    const Problem p = make_problem(t, n_in, n_out);
    const std::vector<float> all = run(p, x, 0, rows, 1);
    auto same_rows = [&](const std::vector<float>& y, int64_t first, const char* what) {
      ASSERT_EQ(std::memcmp(y.data(), all.data() + first * n_out, y.size() * sizeof(float)), 0)
          << type_label(t) << ": " << what;
    };
    for (int threads : {2, 3}) same_rows(run(p, x, 0, rows, threads), 0, "64 rows, 2-3 threads");
    same_rows(run(p, x, 0, 7, 1), 0, "7 rows");
    same_rows(run(p, x, 3, 2, 2), 3, "2 rows at offset 3 (decode kernel per row), 2 threads");
    same_rows(run(p, x, 5, 3, 2), 5, "3 rows at offset 5 (batch kernel), 2 threads");
    same_rows(run(p, x, 10, 17, 2), 10, "17 rows at offset 10 (a full and a 1-row tile block), 2 threads");
    same_rows(run(p, x, 9, 7, 3), 9, "7 rows at offset 9, 3 threads");
    for (int64_t r : {0, 5, 62, 63}) {
      same_rows(run(p, x, r, 1, 1), r, "one row, 1 thread");
      same_rows(run(p, x, r, 1, 2), r, "one row, 2 threads");
    }
  }
}

TEST(Matmul, RejectsMismatchedRowBytes) {
  const Problem p = make_problem(TensorType::Q8_0, 64, 2);
  WeightMatrix m = p.matrix();
  m.row_bytes += 1;
  std::vector<float> x(64), y(2);
  ThreadPool pool(1);
  MatmulScratch scratch;
  EXPECT_THROW(matmul(m, x.data(), 1, 64, y.data(), 2, pool, scratch), std::invalid_argument);
}

}  // namespace
}  // namespace infer::kernels
