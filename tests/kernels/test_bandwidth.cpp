// The bandwidth and int8 throughput probes, and the CPU feature detection used by `infer bench` and
// kernel dispatch.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "kernels/runtime/bandwidth.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/matmul/row_kernels.h"
#include "kernels/x86/avx512/avx512_kernels.h"

namespace infer::kernels {
namespace {

TEST(Bandwidth, ProbeReturnsAPlausibleRateForOneAndTwoThreads) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const double gbs = measure_read_bandwidth_gbs(pool, size_t{16} << 20, 2);
    EXPECT_TRUE(std::isfinite(gbs));
    EXPECT_GT(gbs, 0.1);     // even a loaded machine reads 16 MiB faster than 0.1 GB/s
    EXPECT_LT(gbs, 10000.0);  // and no machine reads it at 10 TB/s: the sum really ran
  }
}

// One core's VPDPBUSD rate (64 multiply-adds each): between one every 4 cycles at 1 GHz and four a
// cycle at 6 GHz, whatever the machine's load.
TEST(VnniProbe, ReturnsAPlausibleRateForOneCore) {
  if (!use_avx512()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU: nothing to probe";
  const double macs = avx512::vnni_macs_per_second();
  std::cout << "[ probe ] VPDPBUSD: " << macs / 64e9 << " G/s on one core\n";
  EXPECT_TRUE(std::isfinite(macs));
  EXPECT_GT(macs, 64 * 0.25e9);
  EXPECT_LT(macs, 64 * 24e9);
}

TEST(CpuFeatures, Avx2PathNeedsAllThreeExtensions) {
  const CpuFeatures& f = cpu_features();
  if (use_avx2()) {
    EXPECT_TRUE(f.avx2 && f.fma && f.f16c);
  }
  const char* forced = std::getenv("INFER_FORCE_SCALAR");
  if (forced && std::string(forced) == "1") {
    EXPECT_FALSE(use_avx2());
  }
}

// Where the CPU and OS offer AMX, the batch kernels must really use it: the bitwise batch tests in
// test_matmul.cpp then compare the AMX tiles with the AVX2 decode kernels.
TEST(CpuFeatures, AmxTileKernelsAreUsedWhereAvailable) {
  const CpuFeatures& f = cpu_features();
  if (!use_amx()) {
    GTEST_SKIP() << "AMX not in use here (avx512 " << f.avx512 << ", amx_int8 " << f.amx_int8
                 << "; INFER_NO_AMX, INFER_FORCE_SCALAR, a seccomp filter or the kernel can turn it off)";
  }
  EXPECT_TRUE(use_avx2() && f.avx512 && f.amx_int8);
  EXPECT_NE(row_kernels(TensorType::Q4_K).dot_tile, nullptr);
  EXPECT_NE(row_kernels(TensorType::Q6_K).dot_tile, nullptr);
  EXPECT_EQ(row_kernels(TensorType::Q8_0).dot_tile, amx_dot_tile(TensorType::Q8_0));
  EXPECT_EQ(row_kernels(TensorType::Q4_0).dot_tile, amx_dot_tile(TensorType::Q4_0));
}

// AVX-512 VNNI alone (AMD Zen 4/5, or INFER_NO_AMX=1) is enough for the interleaved layout: its decode
// and batch kernels use no tiles. The tile kernels are there exactly when AMX is in use.
TEST(CpuFeatures, InterleavedKernelsNeedAvx512VnniOnly) {
  if (!use_avx512()) GTEST_SKIP() << "no AVX-512 VNNI here (or INFER_NO_AVX512 / INFER_FORCE_SCALAR)";
  for (TensorType t : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::Q4_0}) {
    const RowKernels k = row_kernels(t);
    EXPECT_NE(k.dot_outputs_interleaved, nullptr);
    EXPECT_NE(k.dot_rows_interleaved, nullptr);
    EXPECT_EQ(k.dot_tile_interleaved != nullptr, use_amx());
    // The row layout's batches: the AMX tiles where AMX is in use, AVX2 or AVX-512 VNNI tiles otherwise.
    EXPECT_NE(k.dot_tile, nullptr);
    if (use_amx()) {
      EXPECT_EQ(k.dot_tile, amx_dot_tile(t));
    }
  }
}

}  // namespace
}  // namespace infer::kernels
