// The AVX-512 BF16 kernel set of BF16 weights (float_rows_avx512bf16.cpp): its quantiser writes the
// reference's bf16 bytes, every kernel shape gives one value per (weight row, activation row) pair
// (invariant 7), that value is VDPBF16PS's arithmetic written out in scalar code, and it stays within
// f32 rounding of the reference's double sum. Skipped on CPUs without AVX-512 BF16.
#include <bit>
#include <cmath>
#include <limits>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/runtime/cpu_features.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/reference_kernels.h"
#include "kernels/matmul/row_kernels.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

using test::random_floats;

#define INFER_REQUIRE_AVX512_BF16() \
  if (!use_avx512_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU: the set is never chosen"

// VDPBF16PS on one lane, as the Intel SDM writes it: the odd element's product added first, then the
// even one's, each sum rounded to f32 (products of two bf16 are exact in f32); then the kernels'
// fixed tree over the 16 lanes. The tail step reads zeros past n.
float vdpbf16_arithmetic(const std::vector<float>& w, const std::vector<float>& y) {
  const int64_t n = static_cast<int64_t>(w.size());
  float lane[16] = {};
  for (int64_t i = 0; i < n; i += 32) {
    for (int l = 0; l < 16; ++l) {
      const int64_t e = i + 2 * l;
      const float odd = e + 1 < n ? w[e + 1] * y[e + 1] : 0.0f, even = e < n ? w[e] * y[e] : 0.0f;
      lane[l] = (lane[l] + odd) + even;
    }
  }
  float s8[8], s4[4];
  for (int l = 0; l < 8; ++l) s8[l] = lane[l] + lane[l + 8];
  for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

TEST(Avx512Bf16, QuantiserWritesTheReferenceBytes) {
  INFER_REQUIRE_AVX512_BF16();
  const RowKernels k = avx512_bf16_row_kernels(TensorType::BF16);  // AMX-BF16 CPUs choose amx_bf16_row_kernels
  std::vector<float> x = random_floats(1003, 9);
  x[0] = std::nanf("");
  x[1] = -std::numeric_limits<float>::infinity();
  x[2] = 1e-40f;  // subnormal
  x[3] = std::bit_cast<float>(0x3F808000u);  // a tie: rounds to even
  x[4] = std::bit_cast<float>(0x3F818000u);  // a tie: rounds up to even
  x[5] = -0.0f;
  x[6] = std::bit_cast<float>(0x7F800001u);  // a signalling NaN: made quiet
  std::vector<uint16_t> got(x.size()), want(x.size());
  k.quantize_act(x.data(), got.data(), static_cast<int64_t>(x.size()));
  ref::quantize_bf16(x.data(), want.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(k.act_row_bytes(1003), 2006u);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 2), 0);
}

// 5, 1005 and 2061 elements leave masked tails, 2061 and 2816 are long rows; 13 weight rows
// leave partial groups of the decode passes and of the tile, 40 rows a partial row group.
TEST(Avx512Bf16, EveryKernelShapeIsTheScalarArithmeticAndCloseToTheReference) {
  INFER_REQUIRE_AVX512_BF16();
  const TensorType t = TensorType::BF16;
  const RowKernels k = avx512_bf16_row_kernels(t);
  for (int64_t n : {5, 32, 1005, 2061, 2816}) {
    const int64_t n_out = 13;
    const int rows = 40;
    const uint64_t row_bytes = quant_row_bytes(t, n), ab = k.act_row_bytes(n);
    const std::vector<uint8_t> w = test::random_weights(t, n_out, n, 51 + static_cast<uint32_t>(n));
    std::vector<uint8_t> act(ab * rows);
    std::vector<std::vector<float>> wf(n_out, std::vector<float>(n)), yf(rows, std::vector<float>(n));
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> x = random_floats(n, 300 + r);
      k.quantize_act(x.data(), act.data() + r * ab, n);
      ref::dequantize_bf16(act.data() + r * ab, yf[r].data(), n);
    }
    for (int64_t o = 0; o < n_out; ++o) ref::dequantize_bf16(w.data() + o * row_bytes, wf[o].data(), n);
    std::vector<float> expected(n_out * rows), tile(n_out * rows), decode(n_out * rows), single(n_out * rows);
    for (int r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < n_out; ++o) {
        expected[r * n_out + o] = vdpbf16_arithmetic(wf[o], yf[r]);
        k.dot_rows(n, w.data() + o * row_bytes, act.data() + r * ab, ab, 1, &single[r * n_out + o], 1);
        const float reference = ref::dot_bf16(w.data() + o * row_bytes, act.data() + r * ab, n);
        double magnitude = 0;
        for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(double(wf[o][i]) * yf[r][i]);
        EXPECT_NEAR(single[r * n_out + o], reference, 1e-6 * magnitude + 1e-30) << "n=" << n;
      }
      k.dot_outputs(n, w.data(), row_bytes, n_out, act.data() + r * ab, &decode[r * n_out]);
    }
    k.dot_tile(n, w.data(), row_bytes, n_out, act.data(), ab, rows, tile.data(), n_out);
    for (int r = 1; r <= 4; ++r) {  // dot_rows with several rows: each as alone
      std::vector<float> several(r);
      k.dot_rows(n, w.data(), act.data(), ab, r, several.data(), 1);
      for (int i = 0; i < r; ++i) EXPECT_EQ(several[i], single[i * n_out]) << "n=" << n << " rows " << r;
    }
    const std::pair<const char*, const std::vector<float>*> shapes[] = {
        {"dot_rows", &single}, {"dot_outputs", &decode}, {"dot_tile", &tile}};
    for (const auto& [name, got] : shapes) {
      EXPECT_EQ(std::memcmp(got->data(), expected.data(), expected.size() * sizeof(float)), 0)
          << "n=" << n << " " << name;
    }
  }
}

}  // namespace
}  // namespace infer::kernels
