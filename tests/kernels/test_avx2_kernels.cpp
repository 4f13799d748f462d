// Each AVX2 kernel against its scalar reference on random data: activation quantisers bit for bit,
// dot products within 1e-5 of Σ|w·x| (integer cores are exact; only the f32 accumulation order
// differs), for 1..4 rows at once.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_features.h"
#include "kernels/quant.h"
#include "kernels/row_kernels.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

using test::kWeightTypes;
using test::random_floats;
using test::type_label;

// Σ |w_i · x_i| over the dequantised rows: the scale of the dot product's rounding error.
double magnitude(TensorType t, const void* w, const void* act, int64_t n) {
  std::vector<float> wd(n), ad(n);
  dequantize_row(t, w, wd.data(), n);
  dequantize_row(activation_type(t), act, ad.data(), n);
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m += std::fabs(static_cast<double>(wd[i]) * ad[i]);
  return m;
}

class Avx2Kernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!use_avx2()) GTEST_SKIP() << "no AVX2/FMA/F16C, or INFER_FORCE_SCALAR=1";
  }
};

TEST_F(Avx2Kernels, ActivationQuantisersAreBitIdenticalToTheReference) {
  std::vector<float> x = random_floats(4096, 21);
  for (int i = 0; i < 32; ++i) x[256 + i] = 0.0f;  // an all-zero block of every format
  for (int i = 512; i < 544; ++i) x[i] = (i % 7 - 3) * 0.5f;  // exact ties after scaling
  x[1000] = -1e6f;
  for (TensorType t : kWeightTypes) {
    const RowKernels k = row_kernels(t);
    std::vector<uint8_t> fast(activation_bytes(t, x.size())), ref(fast.size());
    k.quantize_act(x.data(), fast.data(), x.size());
    quantize_activation_row(t, x.data(), ref.data(), x.size());
    EXPECT_EQ(std::memcmp(fast.data(), ref.data(), ref.size()), 0) << type_label(t);
  }
}

TEST_F(Avx2Kernels, DotProductsMatchTheReferenceForOneToFourRows) {
  for (int64_t n : {256, 1024, 2816}) {
    for (TensorType t : kWeightTypes) {
      const int rows = 4;
      const std::vector<uint8_t> w = test::random_weights(t, 1, n, 31 + n);
      const uint64_t ab = activation_bytes(t, n);
      std::vector<uint8_t> act(ab * rows);
      for (int r = 0; r < rows; ++r) {
        const std::vector<float> x = random_floats(n, 100 + r);
        quantize_activation_row(t, x.data(), act.data() + r * ab, n);
      }
      const RowKernels k = row_kernels(t);
      for (int nr = 1; nr <= rows; ++nr) {
        float out[4];
        k.dot_rows(n, w.data(), act.data(), ab, nr, out, 1);
        for (int r = 0; r < nr; ++r) {
          const void* a = act.data() + r * ab;
          const double tol = 1e-5 * magnitude(t, w.data(), a, n);
          EXPECT_NEAR(out[r], dot_ref(t, w.data(), a, n), tol) << type_label(t) << " n=" << n << " rows=" << nr;
        }
      }
    }
  }
}

TEST_F(Avx2Kernels, FloatRowsWithTailsMatchTheReference) {
  const int64_t n = 1005;  // 31 steps of 32, one of 8 and a scalar tail of 5
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
    const std::vector<uint8_t> w = test::random_weights(t, 1, n, 41);
    const std::vector<float> x = random_floats(n, 42);
    std::vector<uint8_t> act(activation_bytes(t, n));
    quantize_activation_row(t, x.data(), act.data(), n);
    float out;
    row_kernels(t).dot_rows(n, w.data(), act.data(), 0, 1, &out, 1);
    EXPECT_NEAR(out, dot_ref(t, w.data(), act.data(), n), 1e-5 * magnitude(t, w.data(), act.data(), n))
        << type_label(t);
  }
}

}  // namespace
}  // namespace infer::kernels
