// Each AVX2 kernel against its scalar reference on random data: activation quantisers bit for bit,
// dot products within 1e-5 of Σ|w·x| (integer cores are exact; only the f32 accumulation order
// differs), for 1..4 rows at once.
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/x86/avx2/avx2_kernels.h"
#include "kernels/quant/blocks.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/ops.h"
#include "kernels/quant/quant.h"
#include "kernels/matmul/row_kernels.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

using test::kWeightTypes;
using test::random_floats;
using test::type_label;

template <class Block>
std::vector<uint8_t> widened_to_q8_0(const std::vector<uint8_t>& act, int64_t n) {
  std::vector<uint8_t> out(n / kQK0 * sizeof(BlockQ8_0));
  const auto* src = reinterpret_cast<const Block*>(act.data());
  auto* dst = reinterpret_cast<BlockQ8_0*>(out.data());
  for (int64_t b = 0; b < n / kQK0; ++b) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(src[b].d)), src[b].d) << "scale must be an exact f16 value";
    dst[b].d = f32_to_f16(src[b].d);
    std::memcpy(dst[b].qs, src[b].qs, kQK0);
    if constexpr (requires { src[b].s; }) {
      int sum = 0;
      for (int8_t q : src[b].qs) sum += q;
      EXPECT_EQ(src[b].s, static_cast<float>(sum)) << "block " << b << ": s must be the codes' sum";
    }
  }
  return out;
}

// The AVX2 set's BF16 activation row in element order (avx2_kernels.h: each full step of
// kBf16ActStep values holds the even elements, then the odd ones).
std::vector<float> bf16_act_in_element_order(const std::vector<float>& v) {
  std::vector<float> out(v);
  const int64_t n = static_cast<int64_t>(v.size()), half = avx2::kBf16ActStep / 2;
  for (int64_t i = 0; i + avx2::kBf16ActStep <= n; i += avx2::kBf16ActStep) {
    for (int64_t j = 0; j < half; ++j) out[i + 2 * j] = v[i + j], out[i + 2 * j + 1] = v[i + half + j];
  }
  return out;
}

// F16 and BF16 activations the kernel set writes as f32 values: each must be exactly an F16 (BF16)
// value, and rounding it again gives the reference's bytes.
std::vector<uint8_t> narrowed_from_f32(TensorType t, const RowKernels& k, const std::vector<uint8_t>& act, int64_t n) {
  std::vector<float> v(n), back(n);
  std::memcpy(v.data(), act.data(), n * sizeof(float));
  if (k.quantize_act == avx2::quantize_act_bf16_as_f32) v = bf16_act_in_element_order(v);
  std::vector<uint8_t> out(activation_bytes(t, n));
  quantize_activation_row(t, v.data(), out.data(), n);
  dequantize_row(activation_type(t), out.data(), back.data(), n);
  EXPECT_EQ(std::memcmp(v.data(), back.data(), n * sizeof(float)), 0) << "values must be exact in the narrow type";
  return out;
}

// The kernel set's activation blocks in the reference format (BlockQ8_0F and BlockQ8_1F → Q8_0;
// F16/BF16 values held as f32 → F16/BF16 in element order; others as they are).
std::vector<uint8_t> as_reference_format(TensorType t, const RowKernels& k, const std::vector<uint8_t>& act,
                                         int64_t n) {
  if (k.act_block_bytes == sizeof(BlockQ8_0F)) return widened_to_q8_0<BlockQ8_0F>(act, n);
  if (k.act_block_bytes == sizeof(BlockQ8_1F)) return widened_to_q8_0<BlockQ8_1F>(act, n);
  if (activation_type(t) != TensorType::F32 && k.act_block_elements == 1 && k.act_block_bytes == sizeof(float)) {
    return narrowed_from_f32(t, k, act, n);
  }
  return act;
}

class Avx2Kernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!use_avx2()) GTEST_SKIP() << "no AVX2/FMA/F16C, or INFER_FORCE_SCALAR=1";
  }
};

// GELU/GeGLU: every f16 value (each table entry), the ±10 edges, values that round across them, and
// random floats, with tails of every length: bitwise the scalar lookup.
TEST_F(Avx2Kernels, GeluLookupIsBitwiseTheScalarTable) {
  std::vector<float> x;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = f16_to_f32(uint16_t(h));
    if (!std::isnan(v)) x.push_back(v);
  }
  for (float e : {-10.0f, 10.0f}) {  // the edge, the float below it and the two above
    float v = std::nextafter(e, -100.f);
    for (int i = 0; i < 4; ++i, v = std::nextafter(v, 100.f)) x.push_back(v);
  }
  const std::vector<float> r = random_floats(4099, 11, 8.0f);
  x.insert(x.end(), r.begin(), r.end());
  std::vector<float> up = random_floats(int64_t(x.size()), 12);
  for (int64_t n : {int64_t(x.size()), int64_t(1), int64_t(7), int64_t(9), int64_t(15)}) {
    std::vector<float> ours(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
    gelu(x.data(), ours.data(), n);
    gelu_ref(x.data(), ref.data(), n);
    ASSERT_EQ(0, std::memcmp(ours.data(), ref.data(), size_t(n) * sizeof(float))) << "gelu, n " << n;
    geglu(x.data(), up.data(), ours.data(), n);
    geglu_ref(x.data(), up.data(), ref.data(), n);
    ASSERT_EQ(0, std::memcmp(ours.data(), ref.data(), size_t(n) * sizeof(float))) << "geglu, n " << n;
  }
}

TEST_F(Avx2Kernels, ActivationQuantisersAreBitIdenticalToTheReference) {
  std::vector<float> x = random_floats(4096, 21);
  for (int i = 0; i < 32; ++i) x[256 + i] = 0.0f;  // an all-zero block of every format
  for (int i = 512; i < 544; ++i) x[i] = (i % 7 - 3) * 0.5f;  // exact ties after scaling
  x[1000] = -1e6f;
  // ties for a block's largest magnitude, in one 8-lane step and across steps: the first one's sign is kept
  for (int i : {1290, 1293, 1300, 1560, 1563}) x[i] = i % 2 ? -40.0f : 40.0f;
  for (TensorType t : kWeightTypes) {
    const RowKernels k = row_kernels(t);
    std::vector<uint8_t> fast(k.act_row_bytes(x.size())), ref(activation_bytes(t, x.size()));
    k.quantize_act(x.data(), fast.data(), x.size());
    quantize_activation_row(t, x.data(), ref.data(), x.size());
    EXPECT_EQ(as_reference_format(t, k, fast, x.size()), ref) << type_label(t);
  }
}

// The AVX2 set's BF16 quantiser (the AVX-512 BF16 set replaces it where the CPU has one) on values
// whose rounding is special: ties to even both ways, carries into the exponent, the largest finite
// values rounding to infinity, infinities, signed NaNs with payloads, denormals; and a tail past the
// 8-lane steps.
TEST_F(Avx2Kernels, Bf16QuantiserIsTheReferenceOnSpecialValues) {
  const uint32_t bits[] = {0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3FFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000,
                           0xFF800000, 0x7FC00001, 0xFF812345, 0x7F800001, 0x00000001, 0x80008000, 0x00018000,
                           0x00000000, 0x80000000, 0x3F7F7FFF, 0xC0490FDB, 0x477FE000};
  std::vector<float> x;
  for (uint32_t b : bits) x.push_back(std::bit_cast<float>(b));
  const RowKernels k = avx2_row_kernels(TensorType::BF16);
  std::vector<uint8_t> fast(k.act_row_bytes(static_cast<int64_t>(x.size()))), ref(2 * x.size());
  k.quantize_act(x.data(), fast.data(), static_cast<int64_t>(x.size()));
  quantize_activation_row(TensorType::BF16, x.data(), ref.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(as_reference_format(TensorType::BF16, k, fast, static_cast<int64_t>(x.size())), ref);
}

TEST_F(Avx2Kernels, Q8_KQuantiserStaysInBoundsOnNan) {
  std::vector<float> x = random_floats(512, 23);
  x[3] = std::nanf("");
  std::vector<uint8_t> fast(activation_bytes(TensorType::Q4_K, 512)), ref(fast.size());
  row_kernels(TensorType::Q4_K).quantize_act(x.data(), fast.data(), 512);
  quantize_activation_row(TensorType::Q4_K, x.data(), ref.data(), 512);
  // The second block has no NaN and must be exact; the first just must not crash or read past x.
  EXPECT_EQ(std::memcmp(fast.data() + sizeof(BlockQ8_K), ref.data() + sizeof(BlockQ8_K), sizeof(BlockQ8_K)), 0);
}

TEST_F(Avx2Kernels, DotProductsMatchTheReferenceForOneToFourRows) {
  for (int64_t n : {256, 1024, 2816}) {
    for (TensorType t : kWeightTypes) {
      const int rows = 4;
      const std::vector<uint8_t> w = test::random_weights(t, 1, n, 31 + n);
      const RowKernels k = row_kernels(t);
      const uint64_t ab = activation_bytes(t, n), fb = k.act_row_bytes(n);
      std::vector<uint8_t> act(ab * rows), fast_act(fb * rows);
      for (int r = 0; r < rows; ++r) {
        const std::vector<float> x = random_floats(n, 100 + r);
        quantize_activation_row(t, x.data(), act.data() + r * ab, n);
        k.quantize_act(x.data(), fast_act.data() + r * fb, n);
      }
      for (int nr = 1; nr <= rows; ++nr) {
        float out[4];
        k.dot_rows(n, w.data(), fast_act.data(), fb, nr, out, 1);
        for (int r = 0; r < nr; ++r) {
          const void* a = act.data() + r * ab;
          const double tol = 1e-5 * test::dot_magnitude(t, w.data(), a, n);
          EXPECT_NEAR(out[r], dot_ref(t, w.data(), a, n), tol) << type_label(t) << " n=" << n << " rows=" << nr;
        }
      }
    }
  }
}

// Q8_0, Q4_0, Q5_0 and Q5_1 add each block's exact integer sum (and Q5_1 its minimum's term) in block
// order, as the reference does: every kernel shape (dot_rows, the decode streams, the batch tiles)
// gives the reference's bits, on odd block counts (the decode's 2-block steps leave a tail) and
// weight-row counts that leave partial groups and streams, or fill no stream at all.
TEST_F(Avx2Kernels, BlockFormatsAreBitwiseTheReferenceInEveryKernelShape) {
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0, TensorType::Q5_1}) {
    const RowKernels k = row_kernels(t);
    ASSERT_TRUE(k.dot_outputs && k.dot_tile) << type_label(t);
    for (auto [n, n_out] : {std::pair<int64_t, int64_t>{32, 21}, {224, 21}, {2848, 21}, {224, 3}}) {
      const int rows = 6;
      const uint64_t row_bytes = quant_row_bytes(t, n), ab = activation_bytes(t, n), fb = k.act_row_bytes(n);
      const std::vector<uint8_t> w = test::random_weights(t, n_out, n, 41 + static_cast<uint32_t>(n));
      std::vector<uint8_t> act(ab * rows), fast_act(fb * rows);
      for (int r = 0; r < rows; ++r) {
        const std::vector<float> x = random_floats(n, 200 + r);
        quantize_activation_row(t, x.data(), act.data() + r * ab, n);
        k.quantize_act(x.data(), fast_act.data() + r * fb, n);
      }
      std::vector<float> tile(n_out * rows), decode(n_out * rows), ref(n_out * rows);
      k.dot_tile(n, w.data(), row_bytes, n_out, fast_act.data(), fb, rows, tile.data(), n_out);
      for (int r = 0; r < rows; ++r) {
        k.dot_outputs(n, w.data(), row_bytes, n_out, fast_act.data() + r * fb, &decode[r * n_out]);
        for (int64_t o = 0; o < n_out; ++o) {
          ref[r * n_out + o] = dot_ref(t, w.data() + o * row_bytes, act.data() + r * ab, n);
        }
      }
      EXPECT_EQ(std::memcmp(tile.data(), ref.data(), ref.size() * sizeof(float)), 0)
          << type_label(t) << " n=" << n << " n_out=" << n_out;
      EXPECT_EQ(std::memcmp(decode.data(), ref.data(), ref.size() * sizeof(float)), 0)
          << type_label(t) << " n=" << n << " n_out=" << n_out;
      float out[4];
      k.dot_rows(n, w.data(), fast_act.data(), fb, 4, out, 1);
      for (int r = 0; r < 4; ++r) EXPECT_EQ(out[r], ref[r * n_out]) << type_label(t) << " n=" << n << " row " << r;
    }
  }
}

// The float rows' arithmetic, written out in scalar code: one 8-lane accumulator per pair over the
// steps of `step` elements, each step's parts of 8 in order (fused multiply-adds; BF16's steps of 16
// take the even elements, then the odd ones), the kernels' fixed horizontal sum, then the scalar tail
// of rounded products. Every kernel shape must give exactly this (invariant 7).
float float_rows_arithmetic(const float* w, const float* y, int64_t n, int64_t step) {
  float lane[8] = {};
  int64_t i = 0;
  for (; i + step <= n; i += step) {
    const int64_t parts = step / 8;
    for (int64_t h = 0; h < parts; ++h) {
      for (int l = 0; l < 8; ++l) lane[l] = std::fma(w[i + parts * l + h], y[i + parts * l + h], lane[l]);
    }
  }
  float tail = 0;
  for (; i < n; ++i) tail += static_cast<float>(static_cast<double>(w[i]) * y[i]);  // exact, then rounded once
  float half[4];
  for (int l = 0; l < 4; ++l) half[l] = lane[l] + lane[l + 4];
  return ((half[0] + half[2]) + (half[1] + half[3])) + tail;
}

// 1005 and 2061 elements leave scalar tails, 2816 more than one of the tile's k-blocks; 13 weight
// rows leave partial groups of the decode streams and of the tile, 40 rows a partial row group. BF16
// takes the AVX-512 BF16 set where the CPU has it (test_bf16_avx512.cpp).
TEST_F(Avx2Kernels, FloatRowsAreBitwiseTheirScalarArithmeticInEveryKernelShape) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
    if (t == TensorType::BF16 && use_avx512_bf16()) continue;
    const RowKernels k = row_kernels(t);
    ASSERT_TRUE(k.dot_outputs && k.dot_tile) << type_label(t);
    const int64_t step = t == TensorType::BF16 ? avx2::kBf16ActStep : 8;
    for (int64_t n : {5, 8, 16, 1005, 2061, 2816}) {
      const int64_t n_out = 13;
      const int rows = 40;
      const uint64_t row_bytes = quant_row_bytes(t, n), ab = k.act_row_bytes(n);
      const std::vector<uint8_t> w = test::random_weights(t, n_out, n, 51 + static_cast<uint32_t>(n));
      std::vector<uint8_t> act(ab * rows);
      std::vector<float> wf(n * n_out), yf(n * rows);
      for (int r = 0; r < rows; ++r) {
        const std::vector<float> x = random_floats(n, 300 + r);
        k.quantize_act(x.data(), act.data() + r * ab, n);
        const std::vector<uint8_t> one(act.begin() + r * ab, act.begin() + (r + 1) * ab);
        dequantize_row(activation_type(t), as_reference_format(t, k, one, n).data(), yf.data() + r * n, n);
      }
      for (int64_t o = 0; o < n_out; ++o) dequantize_row(t, w.data() + o * row_bytes, wf.data() + o * n, n);
      std::vector<float> expected(n_out * rows), tile(n_out * rows), decode(n_out * rows), single(n_out * rows);
      for (int r = 0; r < rows; ++r) {
        for (int64_t o = 0; o < n_out; ++o) {
          expected[r * n_out + o] = float_rows_arithmetic(wf.data() + o * n, yf.data() + r * n, n, step);
          k.dot_rows(n, w.data() + o * row_bytes, act.data() + r * ab, ab, 1, &single[r * n_out + o], 1);
        }
        k.dot_outputs(n, w.data(), row_bytes, n_out, act.data() + r * ab, &decode[r * n_out]);
      }
      k.dot_tile(n, w.data(), row_bytes, n_out, act.data(), ab, rows, tile.data(), n_out);
      const std::pair<const char*, const std::vector<float>*> shapes[] = {
          {"dot_rows", &single}, {"dot_outputs", &decode}, {"dot_tile", &tile}};
      for (const auto& [name, got] : shapes) {
        EXPECT_EQ(std::memcmp(got->data(), expected.data(), expected.size() * sizeof(float)), 0)
            << type_label(t) << " n=" << n << " " << name;
      }
    }
  }
}

TEST_F(Avx2Kernels, FloatRowsWithTailsMatchTheReference) {
  const int64_t n = 1005;  // 125 steps of 8 and a scalar tail of 5
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
    const RowKernels k = row_kernels(t);
    const std::vector<uint8_t> w = test::random_weights(t, 1, n, 41);
    const std::vector<float> x = random_floats(n, 42);
    std::vector<uint8_t> act(activation_bytes(t, n)), fast_act(k.act_row_bytes(n));
    quantize_activation_row(t, x.data(), act.data(), n);
    k.quantize_act(x.data(), fast_act.data(), n);
    float out;
    k.dot_rows(n, w.data(), fast_act.data(), 0, 1, &out, 1);
    EXPECT_NEAR(out, dot_ref(t, w.data(), act.data(), n), 1e-5 * test::dot_magnitude(t, w.data(), act.data(), n))
        << type_label(t);
  }
}

// Random Q5_0/Q5_1 blocks with every code and fifth-bit pattern, power-of-two scales and integer
// minimums (every partial sum exact in f32): dot_rows and decode give the reference's bits, which pins
// the 5-bit unpacking on every code.
TEST_F(Avx2Kernels, Q5DotProductsAreBitwiseTheReferenceOnEveryCode) {
  const int64_t n = 32 * kQK0;  // |sums| < 2^24 units of 2^-7: 32 blocks of 31·127·32 and 127·32·2^7
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255), code(-127, 127), min(-1, 1);
  std::vector<BlockQ8_0> y(n / kQK0);
  std::vector<BlockQ8_0F> yf(n / kQK0);
  std::vector<BlockQ8_1F> ys(n / kQK0);  // Q5_1's activations: the same with the codes' sum
  for (size_t b = 0; b < y.size(); ++b) {
    y[b].d = f32_to_f16(0.125f);
    yf[b].d = ys[b].d = 0.125f;
    int sum = 0;
    for (int k = 0; k < kQK0; ++k) {
      y[b].qs[k] = yf[b].qs[k] = ys[b].qs[k] = static_cast<int8_t>(code(rng));
      sum += y[b].qs[k];
    }
    ys[b].s = static_cast<float>(sum);
  }
  std::vector<BlockQ5_0> w0(n / kQK0);
  std::vector<BlockQ5_1> w1(n / kQK0);
  for (size_t b = 0; b < y.size(); ++b) {
    w0[b].d = w1[b].d = f32_to_f16(0.0625f);
    w1[b].m = f32_to_f16(static_cast<float>(min(rng)));
    for (auto& q : w0[b].qh) q = static_cast<uint8_t>(byte(rng));
    for (auto& q : w0[b].qs) q = static_cast<uint8_t>(byte(rng));
    std::memcpy(w1[b].qh, w0[b].qh, 4);
    std::memcpy(w1[b].qs, w0[b].qs, 16);
  }
  // Blocks 0 and 1: every code 31 against ±127, the largest sums (int16 would overflow past 4 steps).
  for (int b = 0; b < 2; ++b) {
    std::memset(w0[b].qh, 0xFF, 4);
    std::memset(w0[b].qs, 0xFF, 16);
    std::memset(w1[b].qh, 0xFF, 4);
    std::memset(w1[b].qs, 0xFF, 16);
    int sum = 0;
    for (int k = 0; k < kQK0; ++k) {
      y[b].qs[k] = yf[b].qs[k] = ys[b].qs[k] = static_cast<int8_t>(b == 0 ? 127 : -127);
      sum += y[b].qs[k];
    }
    ys[b].s = static_cast<float>(sum);
  }
  for (int rows : {1, 3}) {
    float out0[3], out1[3];
    const auto* act0 = reinterpret_cast<const uint8_t*>(yf.data());
    const auto* act1 = reinterpret_cast<const uint8_t*>(ys.data());
    row_kernels(TensorType::Q5_0).dot_rows(n, w0.data(), act0, 0, rows, out0, 1);
    row_kernels(TensorType::Q5_1).dot_rows(n, w1.data(), act1, 0, rows, out1, 1);
    for (int r = 0; r < rows; ++r) {
      EXPECT_EQ(out0[r], dot_ref(TensorType::Q5_0, w0.data(), y.data(), n)) << "rows=" << rows;
      EXPECT_EQ(out1[r], dot_ref(TensorType::Q5_1, w1.data(), y.data(), n)) << "rows=" << rows;
    }
  }
  // The whole row, then each extreme block alone (their errors, were int16 to wrap, would cancel).
  for (int64_t b0 : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
    const int64_t first = b0 < 0 ? 0 : b0, len = b0 < 0 ? n : kQK0;
    float out0, out1, rows0, rows1, tile0, tile1;
    const auto* act0 = reinterpret_cast<const uint8_t*>(yf.data() + first);
    const auto* act1 = reinterpret_cast<const uint8_t*>(ys.data() + first);
    const int64_t nb = len / kQK0;
    row_kernels(TensorType::Q5_0).dot_outputs(len, w0.data() + first, sizeof(BlockQ5_0) * nb, 1, act0, &out0);
    row_kernels(TensorType::Q5_1).dot_outputs(len, w1.data() + first, sizeof(BlockQ5_1) * nb, 1, act1, &out1);
    row_kernels(TensorType::Q5_0).dot_rows(len, w0.data() + first, act0, 0, 1, &rows0, 1);
    row_kernels(TensorType::Q5_1).dot_rows(len, w1.data() + first, act1, 0, 1, &rows1, 1);
    row_kernels(TensorType::Q5_0).dot_tile(len, w0.data() + first, sizeof(BlockQ5_0) * nb, 1, act0,
                                           sizeof(BlockQ8_0F) * nb, 1, &tile0, 1);
    row_kernels(TensorType::Q5_1).dot_tile(len, w1.data() + first, sizeof(BlockQ5_1) * nb, 1, act1,
                                           sizeof(BlockQ8_1F) * nb, 1, &tile1, 1);
    const float ref0 = dot_ref(TensorType::Q5_0, w0.data() + first, y.data() + first, len);
    const float ref1 = dot_ref(TensorType::Q5_1, w1.data() + first, y.data() + first, len);
    EXPECT_EQ(out0, ref0) << "decode, block " << b0;
    EXPECT_EQ(out1, ref1) << "decode, block " << b0;
    EXPECT_EQ(rows0, ref0) << "dot_rows, block " << b0;
    EXPECT_EQ(rows1, ref1) << "dot_rows, block " << b0;
    EXPECT_EQ(tile0, ref0) << "dot_tile, block " << b0;
    EXPECT_EQ(tile1, ref1) << "dot_tile, block " << b0;
  }
}

// The decode streams against the row kernel, bit for bit (invariant 7), on rows of every block count up
// to 17 (odd counts leave the 2-block steps a tail) and longer ones, 5 weight rows (one stream each and
// a group of one).
TEST_F(Avx2Kernels, Q5DecodeIsBitwiseTheRowKernelForEveryRowLength) {
  for (TensorType t : {TensorType::Q5_0, TensorType::Q5_1}) {
    const RowKernels k = row_kernels(t);
    ASSERT_TRUE(k.dot_outputs) << type_label(t);
    std::vector<int64_t> blocks;
    for (int64_t nb = 1; nb <= 17; ++nb) blocks.push_back(nb);
    for (int64_t nb : {36, 216, 512, 513}) blocks.push_back(nb);
    for (int64_t nb : blocks) {
      const int64_t n = nb * kQK0, n_out = 5;
      const uint64_t row_bytes = quant_row_bytes(t, n);
      const std::vector<uint8_t> w = test::random_weights(t, n_out, n, 60 + static_cast<uint32_t>(nb));
      const std::vector<float> x = random_floats(n, 61);
      std::vector<uint8_t> act(k.act_row_bytes(n));
      k.quantize_act(x.data(), act.data(), n);
      std::vector<float> decode(n_out), rows(n_out);
      k.dot_outputs(n, w.data(), row_bytes, n_out, act.data(), decode.data());
      for (int64_t o = 0; o < n_out; ++o) k.dot_rows(n, w.data() + o * row_bytes, act.data(), 0, 1, &rows[o], 1);
      EXPECT_EQ(std::memcmp(decode.data(), rows.data(), n_out * sizeof(float)), 0)
          << type_label(t) << " blocks=" << nb;
    }
  }
}

}  // namespace
}  // namespace infer::kernels
