// Every kernel family of the K-quant dot products forced on the same weights and activations: the AVX2
// row kernels, the AVX-512 VNNI kernels of the interleaved layout and the AMX tile kernels (row and
// interleaved layouts, and Q4_K's planes) give bitwise the same outputs, for decode and for batches;
// the scalar references agree within their rounding. Each family runs where this CPU has it, whatever
// the dispatch would pick (matmul takes only one of them), and the test prints which ran: the tile
// kernels run only on CPUs with AMX, so a pass elsewhere says nothing about them.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/runtime/cpu_features.h"
#include "kernels/quant/interleave.h"
#include "kernels/quant/quant.h"
#include "kernels/matmul/row_kernels.h"
#include "kernel_test_data.h"

namespace infer::kernels {
namespace {

using test::random_floats;
using test::type_label;

struct Families {
  bool avx2, avx512, amx;
  std::string ran = "scalar", skipped;
};

// The families this CPU has. AVX2 and AVX-512 VNNI are called directly wherever the CPU has them (the
// INFER_FORCE_SCALAR and INFER_NO_AVX512 overrides steer dispatch, not this test); the tiles only where
// use_amx() got the OS's tile state, without which they fault.
Families families() {
  const CpuFeatures& f = cpu_features();
  Families k;
  k.avx2 = f.avx2 && f.fma && f.f16c;
  k.avx512 = k.avx2 && f.avx512;
  k.amx = use_amx();
  auto note = [&](bool has, const char* name, const char* why) {
    std::string& list = has ? k.ran : k.skipped;
    list += std::string(list.empty() ? "" : ", ") + name + (has ? "" : why);
  };
  note(k.avx2, "avx2", " (no AVX2/FMA/F16C)");
  note(k.avx512, "avx512-vnni", " (no AVX-512 VNNI)");
  note(k.amx, "amx-tile", " (no AMX, or INFER_NO_AMX=1, INFER_FORCE_SCALAR=1, a seccomp filter)");
  return k;
}

// One weight type's inputs: n_out × n_in weights in both layouts, `rows` activation rows in Q8_K.
struct Inputs {
  TensorType type;
  int64_t n_in, n_out, rows;
  uint64_t row_bytes, act_bytes;
  std::vector<uint8_t> w, interleaved, act;

  Inputs(TensorType t, int64_t n_in_, int64_t n_out_, int64_t rows_, uint32_t seed)
      : type(t), n_in(n_in_), n_out(n_out_), rows(rows_), row_bytes(quant_row_bytes(t, n_in_)),
        act_bytes(activation_bytes(t, n_in_)), w(test::random_weights(t, n_out_, n_in_, seed)), interleaved(w),
        act(act_bytes * rows_) {
    interleave_rows(t, interleaved.data(), n_in, n_out);
    const std::vector<float> x = random_floats(rows * n_in, seed + 1);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_activation_row(t, x.data() + r * n_in, act.data() + r * act_bytes, n_in);
    }
  }
  const uint8_t* act_row(int64_t r) const { return act.data() + r * act_bytes; }
};

using Outputs = std::vector<float>;  // [activation row][weight row]

// A DotRowsFn over every weight row, up to kMaxRows activation rows at a time.
Outputs by_dot_rows(const Inputs& in, int64_t n_rows, DotRowsFn dot_rows) {
  Outputs out(n_rows * in.n_out);
  for (int64_t o = 0; o < in.n_out; ++o) {
    for (int64_t r0 = 0; r0 < n_rows; r0 += kMaxRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kMaxRows, n_rows - r0));
      dot_rows(in.n_in, in.w.data() + o * in.row_bytes, in.act_row(r0), in.act_bytes, nr, &out[r0 * in.n_out + o],
               in.n_out);
    }
  }
  return out;
}

// A DotOutputsFn over every activation row, one at a time (decode).
Outputs by_dot_outputs(const Inputs& in, int64_t n_rows, const uint8_t* w, DotOutputsFn dot_outputs) {
  Outputs out(n_rows * in.n_out);
  for (int64_t r = 0; r < n_rows; ++r) {
    dot_outputs(in.n_in, w, in.row_bytes, in.n_out, in.act_row(r), &out[r * in.n_out]);
  }
  return out;
}

// A DotTileFn over all the weight rows and activation rows at once (batches).
Outputs by_dot_tile(const Inputs& in, int64_t n_rows, const uint8_t* w, DotTileFn dot_tile) {
  Outputs out(n_rows * in.n_out);
  dot_tile(in.n_in, w, in.row_bytes, in.n_out, in.act_row(0), in.act_bytes, static_cast<int>(n_rows), out.data(),
           in.n_out);
  return out;
}

void expect_bitwise(const Outputs& expected, const Outputs& got, const std::string& what) {
  ASSERT_EQ(expected.size(), got.size()) << what;
  EXPECT_EQ(std::memcmp(expected.data(), got.data(), expected.size() * sizeof(float)), 0) << what;
}

TEST(KernelFamilies, EveryFamilyThisCpuHasGivesTheSameOutputsOnTheSameInputs) {
  Families k = families();
  std::cout << "[ families ] ran: " << k.ran << "; skipped: " << (k.skipped.empty() ? "none" : k.skipped) << "\n";
  RecordProperty("families_ran", k.ran);
  RecordProperty("families_skipped", k.skipped);
  // 2 super-blocks, 2 groups of 16 weight rows; 1 row (decode), VNNI passes of 8 and a tail, Q4_K's
  // planes (12-16 rows), a full A tile and one more row.
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    const Inputs in(t, 512, 32, 17, 41 + static_cast<uint32_t>(t));
    for (int64_t n_rows : {1, 5, 12, 16, 17}) {
      const std::string label = std::string(type_label(t)) + " rows=" + std::to_string(n_rows);
      const Outputs scalar = by_dot_rows(in, n_rows, scalar_row_kernels(t).dot_rows);
      if (!k.avx2) continue;
      const RowKernels avx2 = avx2_row_kernels(t);
      ASSERT_EQ(avx2.act_row_bytes(in.n_in), in.act_bytes) << label;  // K-quants: the references' Q8_K
      const Outputs expected = by_dot_rows(in, n_rows, avx2.dot_rows);
      // The references sum in another order: within 1e-5 of Σ|w·x|.
      for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t o = 0; o < in.n_out; ++o) {
          const uint8_t* w = in.w.data() + o * in.row_bytes;
          const double tol = 1e-5 * test::dot_magnitude(t, w, in.act_row(r), in.n_in);
          ASSERT_NEAR(scalar[r * in.n_out + o], expected[r * in.n_out + o], tol) << label << " scalar";
        }
      }
      if (avx2.dot_outputs) {
        expect_bitwise(expected, by_dot_outputs(in, n_rows, in.w.data(), avx2.dot_outputs), label + " avx2 outputs");
      }
      if (k.avx512) {
        const InterleavedKernels vnni = avx512_interleaved_kernels(t, false);
        const uint8_t* wi = in.interleaved.data();
        expect_bitwise(expected, by_dot_outputs(in, n_rows, wi, vnni.dot_outputs), label + " vnni outputs");
        expect_bitwise(expected, by_dot_tile(in, n_rows, wi, vnni.dot_rows), label + " vnni rows");
      }
      if (k.amx && amx_dot_tile(t)) {  // Q5_K has no tiles
        const InterleavedKernels tiles = avx512_interleaved_kernels(t, true);
        const uint8_t* wi = in.interleaved.data();
        expect_bitwise(expected, by_dot_tile(in, n_rows, in.w.data(), amx_dot_tile(t)), label + " amx tiles, rows");
        expect_bitwise(expected, by_dot_tile(in, n_rows, wi, tiles.dot_tile), label + " amx tiles, interleaved");
        expect_bitwise(expected, by_dot_tile(in, n_rows, wi, tiles.dot_rows), label + " amx rows (planes)");
      }
    }
  }
}

}  // namespace
}  // namespace infer::kernels
