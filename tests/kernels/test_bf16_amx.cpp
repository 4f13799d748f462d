// The AMX-BF16 kernel set of BF16 weights (bf16_rows_amxbf16.cpp). On every AVX-512 BF16 CPU its
// code runs on the software model of the tile instructions: every kernel shape gives, for each
// (weight row, activation row) pair, the tile arithmetic written out in scalar code (invariant 7),
// close to the reference. On a CPU with AMX-BF16 the hardware kernels must agree among every shape
// and stay within the reference's bound.
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

#define INFER_REQUIRE_MODEL()                                                                 \
  do {                                                                                        \
    if (!use_avx512_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU: the kernel file is built for it"; \
  } while (0)
#define INFER_REQUIRE_AMX_BF16()                                                                \
  do {                                                                                          \
    if (!use_amx_bf16()) GTEST_SKIP() << "no AMX-BF16 here (or INFER_NO_AMX=1): the set is never chosen"; \
  } while (0)

constexpr TensorType kType = TensorType::BF16;

// One matrix and its activation rows: the kernel's bytes and the values.
struct Case {
  int64_t n, n_out;
  int rows;
  uint64_t row_bytes, act_bytes;
  std::vector<uint8_t> w, act;
  std::vector<std::vector<float>> wf, yf;  // [row][element]
};

Case make_case(const RowKernels& k, int64_t n, int64_t n_out, int rows) {
  Case c{n, n_out, rows, quant_row_bytes(kType, n), k.act_row_bytes(n), {}, {}, {}, {}};
  c.w = test::random_weights(kType, n_out, n, 71 + static_cast<uint32_t>(n));
  c.act.resize(c.act_bytes * rows);
  for (int64_t o = 0; o < n_out; ++o) {
    c.wf.emplace_back(n);
    dequantize_row(kType, c.w.data() + o * c.row_bytes, c.wf.back().data(), n);
  }
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> x = random_floats(n, 500 + r);
    k.quantize_act(x.data(), c.act.data() + r * c.act_bytes, n);
    c.yf.emplace_back(n);
    dequantize_row(kType, c.act.data() + r * c.act_bytes, c.yf.back().data(), n);
  }
  return c;
}

// TDPBF16PS per 32-element chunk as the model computes it: over the chunk's pairs, even element then
// odd, each sum rounded to f32 (zeros past n).
float tile_arithmetic(const std::vector<float>& w, const std::vector<float>& y) {
  const auto n = static_cast<int64_t>(w.size());
  float acc = 0;
  for (int64_t e = 0; e < (n + 31) / 32 * 32; ++e) acc += e < n ? y[e] * w[e] : 0.0f;
  return acc;
}

// Every shape's output over the case: [row][weight row].
struct Shapes {
  std::vector<float> rows, outputs, tile;
  std::vector<std::vector<float>> tile_prefixes;  // the tile over the first 3, 19, 40 and 51 rows
};
constexpr int kPrefixes[] = {3, 19, 40, 51};

Shapes run_shapes(const RowKernels& k, const Case& c) {
  const size_t size = static_cast<size_t>(c.n_out) * c.rows;
  Shapes s{std::vector<float>(size), std::vector<float>(size), std::vector<float>(size), {}};
  for (int r = 0; r < c.rows; ++r) {
    const uint8_t* a = c.act.data() + r * c.act_bytes;
    for (int64_t o = 0; o < c.n_out; ++o) {
      k.dot_rows(c.n, c.w.data() + o * c.row_bytes, a, c.act_bytes, 1, &s.rows[r * c.n_out + o], 1);
    }
    k.dot_outputs(c.n, c.w.data(), c.row_bytes, c.n_out, a, &s.outputs[r * c.n_out]);
  }
  k.dot_tile(c.n, c.w.data(), c.row_bytes, c.n_out, c.act.data(), c.act_bytes, c.rows, s.tile.data(), c.n_out);
  for (int p : kPrefixes) {
    s.tile_prefixes.emplace_back(static_cast<size_t>(c.n_out) * p);
    k.dot_tile(c.n, c.w.data(), c.row_bytes, c.n_out, c.act.data(), c.act_bytes, p, s.tile_prefixes.back().data(),
               c.n_out);
  }
  return s;
}

void expect_shapes_equal(const Shapes& s, const std::vector<float>& expected, const std::string& label) {
  const std::pair<const char*, const std::vector<float>*> shapes[] = {
      {"dot_rows", &s.rows}, {"dot_outputs", &s.outputs}, {"dot_tile", &s.tile}};
  for (const auto& [name, got] : shapes) {
    EXPECT_EQ(std::memcmp(got->data(), expected.data(), expected.size() * sizeof(float)), 0) << label << " " << name;
  }
  for (size_t i = 0; i < s.tile_prefixes.size(); ++i) {
    const std::vector<float>& got = s.tile_prefixes[i];
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
        << label << " dot_tile over the first " << kPrefixes[i] << " rows";
  }
}

// Within f32 rounding of the reference (which sums the same bf16 values).
void expect_close_to_reference(const Case& c, const std::vector<float>& got, const std::string& label) {
  for (int r = 0; r < c.rows; ++r) {
    const uint8_t* a = c.act.data() + r * c.act_bytes;  // the reference's activation bytes
    for (int64_t o = 0; o < c.n_out; ++o) {
      const uint8_t* w = c.w.data() + o * c.row_bytes;
      const float reference = dot_ref(kType, w, a, c.n);
      const double magnitude = test::dot_magnitude(kType, w, a, c.n);
      EXPECT_NEAR(got[r * c.n_out + o], reference, 1e-5 * magnitude + 1e-30) << label << " row " << r << " out " << o;
    }
  }
}

std::string label_of(int64_t n) { return "n=" + std::to_string(n); }

// 5, 100 and 1005 elements leave a short last chunk; 70 weight rows a groups pass of four groups and
// one of a short group; 70 activation rows a blocks pass of four blocks and a short block (a groups
// pass), the prefixes blocks passes of one to three blocks, with and without a short block.
constexpr int64_t kLengths[] = {5, 32, 100, 1005, 2816};
constexpr int64_t kOutputs = 70;
constexpr int kRows = 70;

TEST(AmxBf16, QuantiserWritesTheReferenceBytes) {
  INFER_REQUIRE_MODEL();
  const std::vector<float> x = random_floats(1003, 9);
  const RowKernels k = amx_bf16_row_kernels_model(kType);
  std::vector<uint8_t> got(k.act_row_bytes(1003)), want(activation_bytes(kType, 1003));
  k.quantize_act(x.data(), got.data(), 1003);
  quantize_activation_row(kType, x.data(), want.data(), 1003);
  EXPECT_EQ(got, want);
}

TEST(AmxBf16, ModelIsTheTileArithmeticInEveryShapeAndCloseToTheReference) {
  INFER_REQUIRE_MODEL();
  const RowKernels k = amx_bf16_row_kernels_model(kType);
  for (int64_t n : kLengths) {
    const Case c = make_case(k, n, kOutputs, kRows);
    std::vector<float> expected(static_cast<size_t>(kOutputs) * kRows);
    for (int r = 0; r < kRows; ++r) {
      for (int64_t o = 0; o < kOutputs; ++o) expected[r * kOutputs + o] = tile_arithmetic(c.wf[o], c.yf[r]);
    }
    const Shapes s = run_shapes(k, c);
    expect_shapes_equal(s, expected, label_of(n));
    expect_close_to_reference(c, s.tile, label_of(n));
  }
}

// TDPBF16PS's sums are not the SDM's sequential order bit for bit (an Emerald Rapids Xeon differs from
// the model in every case here), so the hardware is held to one value per pair whatever the shape,
// and to the reference's bound.
TEST(AmxBf16, HardwareIsOneArithmeticInEveryShapeAndCloseToTheReference) {
  INFER_REQUIRE_AMX_BF16();
  const RowKernels k = amx_bf16_row_kernels(kType);
  ASSERT_EQ(row_kernels(kType).dot_tile, k.dot_tile);
  for (int64_t n : kLengths) {
    const Case c = make_case(k, n, kOutputs, kRows);
    const Shapes s = run_shapes(k, c);
    expect_shapes_equal(s, s.tile, label_of(n) + " (against its own dot_tile)");
    expect_close_to_reference(c, s.tile, label_of(n));
  }
}

}  // namespace
}  // namespace infer::kernels
