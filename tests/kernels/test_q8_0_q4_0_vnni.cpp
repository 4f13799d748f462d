// The AVX-512 batch kernels of Q8_0 and Q4_0 weights: the VNNI tile (row layout,
// q8_0_q4_0_q5_0_q5_1_avx512.cpp) and the AMX-INT8 tiles (row and interleaved layouts, q8_0_q4_0_amx.cpp, on the
// hardware and on the software model of the tile instructions): every output bitwise what the AVX2
// kernel (dot_rows) gives for the same weight row and activation row (invariant 7), on random data of
// odd sizes and on the tiny reference models' tensors. Skipped on CPUs without AVX-512 VNNI (the AMX
// hardware test: without AMX), where the kernels are never chosen.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/file.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/quant/interleave.h"
#include "kernels/quant/quant.h"
#include "kernels/matmul/row_kernels.h"
#include "kernel_test_data.h"
#include "support/data_dirs.h"

namespace infer::kernels {
namespace {

using test::random_floats;
using test::type_label;

#define INFER_REQUIRE_VNNI()                                                                     \
  if (!use_avx512()) GTEST_SKIP() << "no AVX-512 F/BW/VL/VNNI on this CPU: the kernel is never chosen"

// `tile` over weight rows [0, n_w) of w (in the layout the kernel reads) against n_rows rows of x, called
// once for the whole batch, against dot_rows over the same rows in row layout (`rows_w`), per weight row
// and group of kMaxRows activation rows.
void expect_kernel_matches_rows(DotTileFn tile, TensorType t, const uint8_t* w, const uint8_t* rows_w, int64_t n,
                                int64_t n_w, const float* x, int n_rows, const std::string& what) {
  ASSERT_NE(tile, nullptr) << type_label(t);
  const RowKernels k = row_kernels(t);
  const uint64_t rb = quant_row_bytes(t, n), ab = k.act_row_bytes(n);
  std::vector<uint8_t> act(ab * n_rows);
  for (int r = 0; r < n_rows; ++r) k.quantize_act(x + r * n, act.data() + r * ab, n);
  const int64_t out_stride = n_w + 3;  // outputs are written only where they belong
  std::vector<float> got(n_rows * out_stride, -7.0f), want(n_rows * out_stride, -7.0f);
  tile(n, w, rb, n_w, act.data(), ab, n_rows, got.data(), out_stride);
  for (int64_t o = 0; o < n_w; ++o) {
    for (int r0 = 0; r0 < n_rows; r0 += kMaxRows) {
      const int nr = std::min(kMaxRows, n_rows - r0);
      k.dot_rows(n, rows_w + o * rb, act.data() + r0 * ab, ab, nr, want.data() + r0 * out_stride + o, out_stride);
    }
  }
  for (int r = 0; r < n_rows; ++r) {
    for (int64_t o = 0; o < out_stride; ++o) {
      const float a = got[r * out_stride + o], b = want[r * out_stride + o];
      ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << type_label(t) << " " << what << ": n=" << n << " n_w=" << n_w
                                                  << " rows=" << n_rows << " at row " << r << " output " << o
                                                  << ": " << a << " vs " << b;
    }
  }
}

// The VNNI tile (row layout), which batches take on AVX-512 CPUs without AMX.
void expect_tile_matches_rows(TensorType t, const uint8_t* w, int64_t n, int64_t n_w, const float* x, int n_rows,
                              const std::string& what) {
  const DotTileFn tile = avx512_dot_tile(t);
  if (!use_amx()) {
    ASSERT_EQ(row_kernels(t).dot_tile, tile) << type_label(t) << ": not the kernel chosen for batches";
  }
  expect_kernel_matches_rows(tile, t, w, w, n, n_w, x, n_rows, what);
}

TEST(VnniQ8_0Q4_0, TileIsBitwiseTheAvx2KernelOnRandomData) {
  INFER_REQUIRE_VNNI();
  struct Shape {
    int64_t n, n_w;
  };
  // Odd and even block counts, one block, weight-row counts off the 16-row groups, and row counts off
  // the 8-row passes.
  const Shape shapes[] = {{32, 1}, {64, 3}, {96, 5}, {160, 7}, {544, 13}, {1056, 37}, {2080, 203}};
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0}) {
    for (const Shape& s : shapes) {
      const std::vector<uint8_t> w = test::random_weights(t, s.n_w, s.n, 11 + static_cast<uint32_t>(s.n));
      const int max_rows = s.n_w > 100 ? 9 : 17;  // the kernel takes 8 activation rows a pass
      const std::vector<float> x = random_floats(max_rows * s.n, 21 + static_cast<uint32_t>(s.n_w));
      for (int rows = 1; rows <= max_rows; ++rows) {
        expect_tile_matches_rows(t, w.data(), s.n, s.n_w, x.data(), rows, "random");
      }
    }
  }
}

// More activation rows than one of the kernel's L2 tiles holds (about 160 KiB of them): the second
// tile's rows against the same groups.
TEST(VnniQ8_0Q4_0, TileIsBitwiseTheAvx2KernelAcrossActivationTiles) {
  INFER_REQUIRE_VNNI();
  const int64_t n = 2080, n_w = 40;
  const int rows = 150;  // 2 340-byte rows: tiles of 64
  const std::vector<float> x = random_floats(rows * n, 77);
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0}) {
    const std::vector<uint8_t> w = test::random_weights(t, n_w, n, 13);
    expect_tile_matches_rows(t, w.data(), n, n_w, x.data(), rows, "two tiles");
  }
}

// Extreme codes: weights and activations at ±127 and -128 weights (Q8_0), all-zero blocks.
TEST(VnniQ8_0Q4_0, TileIsBitwiseTheAvx2KernelOnExtremeCodes) {
  INFER_REQUIRE_VNNI();
  const int64_t n = 192, n_w = 6, rows = 5;
  std::vector<float> x = random_floats(rows * n, 5);
  for (int64_t i = 0; i < 32; ++i) x[i] = 0;                  // a zero block: scale 0
  for (int64_t i = 64; i < 96; ++i) x[i] = (i % 2) ? 1 : -1;  // every code ±127
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0}) {
    std::vector<uint8_t> w = test::random_weights(t, n_w, n, 3);
    if (t == TensorType::Q8_0) {
      for (int64_t o = 0; o < n_w; ++o) {
        int8_t* qs = reinterpret_cast<int8_t*>(w.data() + o * quant_row_bytes(t, n) + 2);  // block 0's codes
        for (int j = 0; j < 32; ++j) qs[j] = static_cast<int8_t>(j % 3 == 0 ? -128 : (j % 3 == 1 ? 127 : -127));
      }
    }
    expect_tile_matches_rows(t, w.data(), n, n_w, x.data(), rows, "extreme codes");
  }
}

// fn(tensor) for every 2-D Q8_0 or Q4_0 tensor of the tiny reference models of those types.
template <class Fn>
void for_each_real_tensor(Fn fn) {
  for (const char* name : {"q8_0", "q4_0"}) {
    const auto file = gguf::File::open(infer::test::reference_dir() + "/models/tiny-llama-" + name + ".gguf");
    int checked = 0;
    for (const auto& t : file->tensors()) {
      if (t.n_dims != 2 || (t.type != TensorType::Q8_0 && t.type != TensorType::Q4_0)) continue;
      fn(t);
      ++checked;
    }
    EXPECT_GT(checked, 10) << name;
  }
}

TEST(VnniQ8_0Q4_0, TileIsBitwiseTheAvx2KernelOnRealTensors) {
  INFER_REQUIRE_VNNI();
  INFER_REQUIRE_DIR(infer::test::reference_dir() + "/models");
  for_each_real_tensor([](const gguf::TensorView& t) {
    const int64_t n = t.ne[0], n_w = std::min<int64_t>(t.ne[1], 45);
    const std::vector<float> x = random_floats(7 * n, 31);
    expect_tile_matches_rows(t.type, t.data, n, n_w, x.data(), 7, t.name);
  });
}

// An AMX-INT8 tile kernel, given by the layout it reads, on weight-row counts in and off the 16-row
// groups (the interleaved layout: whole groups), block counts in and off its passes of 4 blocks, and
// activation row counts in and off its blocks of 16, across two activation tiles.
void expect_amx_kernel_matches_rows(DotTileFn (*kernel)(TensorType, bool), const char* what) {
  struct Shape {
    int64_t n, n_w;
  };
  const Shape shapes[] = {{32, 16}, {96, 13}, {160, 32}, {544, 37}, {2080, 48}};
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0}) {
    for (const Shape& s : shapes) {
      const std::vector<uint8_t> w = test::random_weights(t, s.n_w, s.n, 17 + static_cast<uint32_t>(s.n));
      const int64_t grouped = s.n_w / 16 * 16;
      std::vector<uint8_t> interleaved(w);
      if (grouped > 0) interleave_rows(t, interleaved.data(), s.n, s.n_w);
      for (int rows : {1, 5, 16, 17, 33, 150}) {
        const std::vector<float> x = random_floats(rows * s.n, 23 + static_cast<uint32_t>(rows));
        expect_kernel_matches_rows(kernel(t, false), t, w.data(), w.data(), s.n, s.n_w, x.data(), rows,
                                   std::string(what) + " rows layout");
        if (grouped > 0) {
          expect_kernel_matches_rows(kernel(t, true), t, interleaved.data(), w.data(), s.n, grouped, x.data(), rows,
                                     std::string(what) + " interleaved layout");
        }
      }
    }
  }
}

TEST(AmxInt8Q8_0Q4_0, ModelIsBitwiseTheAvx2KernelInBothLayouts) {
  INFER_REQUIRE_VNNI();
  expect_amx_kernel_matches_rows(amx_int8_tile_model, "model");
}

TEST(AmxInt8Q8_0Q4_0, ModelIsBitwiseTheAvx2KernelOnRealTensors) {
  INFER_REQUIRE_VNNI();
  INFER_REQUIRE_DIR(infer::test::reference_dir() + "/models");
  for_each_real_tensor([](const gguf::TensorView& t) {
    const int64_t n = t.ne[0], n_w = std::min<int64_t>(t.ne[1], 48) / 16 * 16;  // whole groups
    ASSERT_GT(n_w, 0) << t.name;
    const auto* w = static_cast<const uint8_t*>(t.data);
    std::vector<uint8_t> interleaved(w, w + n_w * quant_row_bytes(t.type, n));
    interleave_rows(t.type, interleaved.data(), n, n_w);
    const std::vector<float> x = random_floats(19 * n, 37);
    expect_kernel_matches_rows(amx_int8_tile_model(t.type, false), t.type, w, w, n, n_w, x.data(), 19, t.name);
    expect_kernel_matches_rows(amx_int8_tile_model(t.type, true), t.type, interleaved.data(), w, n, n_w, x.data(), 19,
                               t.name + " interleaved");
  });
}

DotTileFn hardware_kernel(TensorType t, bool interleaved) {
  return interleaved ? row_kernels(t).dot_tile_interleaved : row_kernels(t).dot_tile;
}

TEST(AmxInt8Q8_0Q4_0, HardwareIsBitwiseTheAvx2KernelInBothLayouts) {
  if (!use_amx()) GTEST_SKIP() << "AMX not in use here (no AMX-INT8, INFER_NO_AMX=1, or the OS refused the tile state)";
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0}) {
    ASSERT_EQ(row_kernels(t).dot_tile, amx_dot_tile(t)) << type_label(t) << ": not the kernel chosen for batches";
  }
  expect_amx_kernel_matches_rows(hardware_kernel, "hardware");
}

}  // namespace
}  // namespace infer::kernels
