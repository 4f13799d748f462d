// matmul against matmul_ref for every weight type, and invariant 7: each output is bitwise the same
// whatever the batch size, the row's place in the batch and the thread count, and whether the matrix
// is multiplied alone or with others sharing its input.
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul/matmul.h"
#include "kernels/quant/quant.h"
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
  // 67 outputs: uneven thread shares and tiles; 250 rows: the batch chunks split them in three
  const int64_t n_in = 512, n_out = 67, rows = 250;
  const std::vector<float> x = random_floats(rows * n_in, 5);
  for (TensorType t : kWeightTypes) {
    const Problem p = make_problem(t, n_in, n_out);
    const std::vector<float> all = run(p, x, 0, rows, 1);
    auto same_rows = [&](const std::vector<float>& y, int64_t first, const char* what) {
      ASSERT_EQ(std::memcmp(y.data(), all.data() + first * n_out, y.size() * sizeof(float)), 0)
          << type_label(t) << ": " << what;
    };
    for (int threads : {2, 3}) same_rows(run(p, x, 0, rows, threads), 0, "250 rows, 2-3 threads");
    same_rows(run(p, x, 0, 7, 1), 0, "7 rows");
    same_rows(run(p, x, 3, 2, 2), 3, "2 rows at offset 3 (decode kernel per row), 2 threads");
    same_rows(run(p, x, 5, 3, 2), 5, "3 rows at offset 5 (batch kernel), 2 threads");
    same_rows(run(p, x, 10, 17, 2), 10, "17 rows at offset 10 (a full and a 1-row tile block), 2 threads");
    same_rows(run(p, x, 9, 7, 3), 9, "7 rows at offset 9, 3 threads");
    same_rows(run(p, x, 100, 150, 2), 100, "150 rows at offset 100, 2 threads");
    for (int64_t r : {0, 5, 62, 249}) {
      same_rows(run(p, x, r, 1, 1), r, "one row, 1 thread");
      same_rows(run(p, x, r, 1, 2), r, "one row, 2 threads");
    }
  }
}

// matmul_shared: each matrix's output is bitwise what matmul gives it alone, whether the matrices
// share the quantised activations (Q4_K with Q6_K, both Q8_K) or not (Q8_0 with Q4_K: one run each),
// for decode and batches, 1-3 threads; bad arguments are refused.
TEST(Matmul, SharedInputOutputsAreBitwiseEachMatmulAlone) {
  const int64_t n_in = 512, rows = 12;
  const std::vector<float> x = random_floats(rows * n_in, 9);
  const std::vector<std::vector<TensorType>> sets = {
      {TensorType::Q4_K, TensorType::Q4_K, TensorType::Q6_K},
      {TensorType::Q8_0, TensorType::Q4_K},
      {TensorType::F16, TensorType::F32, TensorType::BF16, TensorType::Q4_0}};
  for (const auto& types : sets) {
    std::vector<Problem> problems;
    for (size_t i = 0; i < types.size(); ++i) problems.push_back(make_problem(types[i], n_in, 35 + 16 * int64_t(i)));
    for (int threads : {1, 2, 3}) {
      for (int64_t count : {int64_t(1), int64_t(2), int64_t(9), rows}) {
        ThreadPool pool(threads);
        MatmulScratch scratch;
        std::vector<WeightMatrix> matrices;
        for (const Problem& p : problems) matrices.push_back(p.matrix());
        std::vector<std::vector<float>> ys;
        std::vector<MatmulOutput> outputs;
        for (size_t i = 0; i < problems.size(); ++i) ys.emplace_back(count * problems[i].n_out, -1.0f);
        for (size_t i = 0; i < problems.size(); ++i) outputs.push_back({&matrices[i], ys[i].data(), problems[i].n_out});
        matmul_shared(outputs, x.data(), count, n_in, pool, scratch);
        for (size_t i = 0; i < problems.size(); ++i) {
          const std::vector<float> alone = run(problems[i], x, 0, count, threads);
          ASSERT_EQ(std::memcmp(ys[i].data(), alone.data(), alone.size() * sizeof(float)), 0)
              << type_label(types[i]) << " (matrix " << i << " of " << problems.size() << "), " << count << " rows, "
              << threads << " threads";
        }
      }
    }
  }
}

// A prepare step writes each input row just before it is quantised: every row exactly once, and the
// outputs are those of the rows written beforehand.
TEST(Matmul, PrepareWritesEveryRowOnceBeforeItIsRead) {
  const int64_t n_in = 256, rows = 11;
  const std::vector<float> source = random_floats(rows * n_in, 13);
  const Problem q = make_problem(TensorType::Q4_K, n_in, 48), k = make_problem(TensorType::Q6_K, n_in, 32);
  const WeightMatrix mq = q.matrix(), mk = k.matrix();
  for (int threads : {1, 2, 3}) {
    for (int64_t count : {int64_t(1), int64_t(3), rows}) {
      ThreadPool pool(threads);
      MatmulScratch scratch;
      std::vector<float> x(rows * n_in, NAN);  // written by prepare only
      std::vector<std::atomic<int>> written(static_cast<size_t>(rows));
      const PrepareRows prepare = [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          std::memcpy(&x[size_t(r * n_in)], &source[size_t(r * n_in)], sizeof(float) * n_in);
          written[size_t(r)]++;
        }
      };
      std::vector<float> yq(count * 48), yk(count * 32);
      const MatmulOutput outputs[] = {{&mq, yq.data(), 48}, {&mk, yk.data(), 32}};
      matmul_shared(outputs, x.data(), count, n_in, pool, scratch, prepare);
      for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(written[size_t(r)].load(), r < count ? 1 : 0) << "row " << r;
      const std::vector<float> aq = run(q, source, 0, count, threads), ak = run(k, source, 0, count, threads);
      EXPECT_EQ(std::memcmp(yq.data(), aq.data(), aq.size() * sizeof(float)), 0) << count << " rows, " << threads;
      EXPECT_EQ(std::memcmp(yk.data(), ak.data(), ak.size() * sizeof(float)), 0) << count << " rows, " << threads;
    }
  }
}

TEST(Matmul, SharedInputRejectsMismatchedInputsAndTooManyMatrices) {
  const Problem a = make_problem(TensorType::Q8_0, 64, 2), b = make_problem(TensorType::Q8_0, 96, 2);
  const WeightMatrix ma = a.matrix(), mb = b.matrix();
  std::vector<float> x(96), y(8);
  ThreadPool pool(1);
  MatmulScratch scratch;
  const MatmulOutput mixed[] = {{&ma, y.data(), 2}, {&mb, y.data() + 2, 2}};
  EXPECT_THROW(matmul_shared(mixed, x.data(), 1, 64, pool, scratch), std::invalid_argument);
  const MatmulOutput five[] = {{&ma, y.data(), 2}, {&ma, y.data(), 2}, {&ma, y.data(), 2}, {&ma, y.data(), 2},
                               {&ma, y.data(), 2}};
  EXPECT_THROW(matmul_shared(five, x.data(), 1, 64, pool, scratch), std::invalid_argument);
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
