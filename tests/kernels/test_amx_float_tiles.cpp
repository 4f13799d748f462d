// The AMX-BF16 kernel set of BF16 and F16 weights (float_tiles_amxbf16.cpp). On every AVX-512 BF16
// CPU its code runs on the software model of the tile instructions: the quantisers write the bf16
// parts, and every kernel shape gives, for each (weight row, activation row) pair, the tile arithmetic
// written out in scalar code (invariant 7), close to the reference. On a CPU with AMX-BF16 the hardware
// kernels must agree among every shape and stay within the reference's bound.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_features.h"
#include "kernels/quant.h"
#include "kernels/reference_kernels.h"
#include "kernels/row_kernels.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

using test::random_floats;

#define INFER_REQUIRE_MODEL()                                                                  \
  do {                                                                                         \
    if (!use_avx512_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU: the model's conversions need it"; \
  } while (0)
#define INFER_REQUIRE_AMX_BF16()                                                                 \
  do {                                                                                           \
    if (!use_amx_bf16()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or INFER_NO_AMX=1): the set is never chosen"; \
  } while (0)

constexpr TensorType kTypes[] = {TensorType::BF16, TensorType::F16};

// The exact split of a float into a bf16 high part and a remainder (0 for infinities and NaN).
struct Parts {
  float hi, lo;
};
Parts split(float f) {
  const float hi = bf16_to_f32(f32_to_bf16(f));
  return {hi, std::isfinite(f) ? f - hi : 0.0f};
}

// One matrix and its activation rows in both forms: the kernel's bytes and the values as parts.
struct Case {
  TensorType t;
  int64_t n, n_out;
  int rows;
  uint64_t row_bytes, act_bytes;
  std::vector<uint8_t> w, act;
  std::vector<std::vector<Parts>> wp, yp;  // [row][element]
};

Case make_case(const RowKernels& k, TensorType t, int64_t n, int64_t n_out, int rows) {
  Case c{t, n, n_out, rows, quant_row_bytes(t, n), k.act_row_bytes(n), {}, {}, {}, {}};
  c.w = test::random_weights(t, n_out, n, 71 + static_cast<uint32_t>(n));
  c.act.resize(c.act_bytes * rows);
  for (int64_t o = 0; o < n_out; ++o) {
    std::vector<float> wf(n);
    dequantize_row(t, c.w.data() + o * c.row_bytes, wf.data(), n);
    c.wp.emplace_back();
    for (float v : wf) c.wp.back().push_back(split(v));
  }
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> x = random_floats(n, 500 + r);
    k.quantize_act(x.data(), c.act.data() + r * c.act_bytes, n);
    c.yp.emplace_back();
    for (float v : x) c.yp.back().push_back(split(t == TensorType::F16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v))));
  }
  return c;
}

// TDPBF16PS per 32-element chunk, in the kernels' order: BF16 one product per chunk, F16 three
// (high × high, low × high, high × low), each over the chunk's pairs, even element then odd.
float tile_arithmetic(const std::vector<Parts>& w, const std::vector<Parts>& y, bool three) {
  const auto n = static_cast<int64_t>(w.size());
  float acc = 0;
  auto product = [&](int64_t c, float Parts::*ya, float Parts::*wa) {
    for (int64_t e = c; e < c + 32; ++e) acc += e < n ? y[e].*ya * (w[e].*wa) : 0.0f;
  };
  for (int64_t c = 0; c < n; c += 32) {
    product(c, &Parts::hi, &Parts::hi);
    if (three) {
      product(c, &Parts::lo, &Parts::hi);
      product(c, &Parts::hi, &Parts::lo);
    }
  }
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

// Within the split's and f32's rounding of the reference (which sums the same f16/bf16 values).
void expect_close_to_reference(const Case& c, const std::vector<float>& got, const std::string& label) {
  std::vector<uint8_t> ref_act(activation_bytes(c.t, c.n));
  for (int r = 0; r < c.rows; ++r) {
    std::vector<float> x = random_floats(c.n, 500 + r);
    quantize_activation_row(c.t, x.data(), ref_act.data(), c.n);
    for (int64_t o = 0; o < c.n_out; ++o) {
      const uint8_t* w = c.w.data() + o * c.row_bytes;
      const float reference = dot_ref(c.t, w, ref_act.data(), c.n);
      const double magnitude = test::dot_magnitude(c.t, w, ref_act.data(), c.n);
      EXPECT_NEAR(got[r * c.n_out + o], reference, 1e-5 * magnitude + 1e-30) << label << " row " << r << " out " << o;
    }
  }
}

std::string label_of(TensorType t, int64_t n) { return std::string(test::type_label(t)) + " n=" + std::to_string(n); }

// 5, 100 and 1005 elements leave a short last chunk; 70 weight rows a groups pass of four groups and
// one of a short group; 70 activation rows a blocks pass of four blocks and a short block (a groups
// pass), the prefixes blocks passes of one to three blocks, with and without a short block.
constexpr int64_t kLengths[] = {5, 32, 100, 1005, 2816};
constexpr int64_t kOutputs = 70;
constexpr int kRows = 70;

TEST(AmxFloatTiles, ModelQuantisersWriteTheExactParts) {
  INFER_REQUIRE_MODEL();
  const int64_t n = 1003;
  std::vector<float> x = random_floats(n, 9);
  x[0] = 70000.0f;  // beyond f16: infinity, low part 0
  x[1] = 3e-6f;     // an f16 subnormal
  for (TensorType t : kTypes) {
    const RowKernels k = amx_float_row_kernels_model(t);
    std::vector<uint16_t> got(k.act_row_bytes(n) / 2);
    k.quantize_act(x.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      if (t == TensorType::BF16) {
        ASSERT_EQ(got[i], f32_to_bf16(x[i])) << i;
        continue;
      }
      const float f = f16_to_f32(f32_to_f16(x[i]));
      const Parts p = split(f);
      ASSERT_EQ(got[i], f32_to_bf16(p.hi)) << i;
      ASSERT_EQ(got[n + i], f32_to_bf16(p.lo)) << i;
      if (std::isfinite(f)) {
        ASSERT_EQ(bf16_to_f32(got[i]) + bf16_to_f32(got[n + i]), f) << "inexact split at " << i;
      }
    }
  }
}

TEST(AmxFloatTiles, ModelIsTheTileArithmeticInEveryShapeAndCloseToTheReference) {
  INFER_REQUIRE_MODEL();
  for (TensorType t : kTypes) {
    const RowKernels k = amx_float_row_kernels_model(t);
    for (int64_t n : kLengths) {
      const Case c = make_case(k, t, n, kOutputs, kRows);
      std::vector<float> expected(static_cast<size_t>(kOutputs) * kRows);
      for (int r = 0; r < kRows; ++r) {
        for (int64_t o = 0; o < kOutputs; ++o) {
          expected[r * kOutputs + o] = tile_arithmetic(c.wp[o], c.yp[r], t == TensorType::F16);
        }
      }
      const Shapes s = run_shapes(k, c);
      expect_shapes_equal(s, expected, label_of(t, n));
      expect_close_to_reference(c, s.tile, label_of(t, n));
    }
  }
}

// TDPBF16PS's sums are not the SDM's sequential order bit for bit (an Emerald Rapids Xeon differs from
// the model in every case here), so the hardware is held to one value per pair whatever the shape,
// and to the reference's bound.
TEST(AmxFloatTiles, HardwareIsOneArithmeticInEveryShapeAndCloseToTheReference) {
  INFER_REQUIRE_AMX_BF16();
  for (TensorType t : kTypes) {
    const RowKernels k = amx_float_row_kernels(t);
    ASSERT_EQ(row_kernels(t).dot_tile, k.dot_tile) << test::type_label(t);
    for (int64_t n : kLengths) {
      const Case c = make_case(k, t, n, kOutputs, kRows);
      const Shapes s = run_shapes(k, c);
      expect_shapes_equal(s, s.tile, label_of(t, n) + " (against its own dot_tile)");
      expect_close_to_reference(c, s.tile, label_of(t, n));
    }
  }
}

}  // namespace
}  // namespace infer::kernels
