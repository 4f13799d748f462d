// The interleaved weight layout (interleave.h): the transform round-trips, lookups read through it,
// and on CPUs with its kernels every matmul output is bitwise what the row layout gives, on random
// weights and on llama.cpp's blocks, for decode (1 row), small batches (VNNI, 2-16 rows; Q4_K's AMX
// planes from 12) and larger ones (AMX tiles), and thread counts.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/file.h"
#include "kernels/quant/blocks.h"
#include "kernels/matmul/decode_streams.h"
#include "kernels/quant/interleave.h"
#include "kernels/matmul/matmul.h"
#include "kernels/quant/quant.h"
#include "kernel_test_data.h"
#include "support/data_dirs.h"

namespace infer::kernels {
namespace {

using test::random_floats;
using test::type_label;

constexpr TensorType kInterleavedTypes[] = {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_K,
                                            TensorType::Q6_K};

struct Pair {  // one matrix in both layouts
  std::vector<uint8_t> rows, interleaved;
  WeightMatrix row_matrix, interleaved_matrix;
};

Pair make_pair(TensorType t, int64_t n_in, int64_t n_out, std::vector<uint8_t> bytes) {
  Pair p;
  p.rows = std::move(bytes);
  p.interleaved = p.rows;
  interleave_rows(t, p.interleaved.data(), n_in, n_out);
  const uint64_t rb = quant_row_bytes(t, n_in);
  p.row_matrix = {t, p.rows.data(), n_in, n_out, rb};
  p.interleaved_matrix = {t, p.interleaved.data(), n_in, n_out, rb, true};
  return p;
}

std::vector<float> run(const WeightMatrix& w, const std::vector<float>& x, int64_t first, int64_t count, int threads) {
  ThreadPool pool(threads);
  MatmulScratch scratch;
  std::vector<float> y(count * w.n_out);
  matmul(w, x.data() + first * w.n_in, count, w.n_in, y.data(), w.n_out, pool, scratch);
  return y;
}

// Every type with blocks of 4 bytes or more, including ones with a 2-byte tail (Q8_0, Q4_0, Q6_K).
TEST(Interleave, RoundTripsEveryRowAndLeavesTheTailRows) {
  const int64_t n_in = 512, n_out = 16 * 3 + 5;
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                       TensorType::F32}) {
    const std::vector<uint8_t> rows = test::random_weights(t, n_out, n_in, 11);
    std::vector<uint8_t> il = rows;
    interleave_rows(t, il.data(), n_in, n_out);
    const uint64_t rb = quant_row_bytes(t, n_in);
    EXPECT_NE(std::memcmp(il.data(), rows.data(), 48 * rb), 0) << type_label(t) << ": groups unchanged";
    EXPECT_EQ(std::memcmp(il.data() + 48 * rb, rows.data() + 48 * rb, 5 * rb), 0) << type_label(t) << ": tail moved";
    std::vector<uint8_t> row(rb);
    std::vector<float> a(n_in), b(n_in);
    const WeightMatrix w{t, il.data(), n_in, n_out, rb, true};
    for (int64_t r = 0; r < n_out; ++r) {
      deinterleave_row(t, il.data(), n_in, n_out, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), rows.data() + r * rb, rb), 0) << type_label(t) << " row " << r;
      dequantize_weight_row(w, r, a.data());
      dequantize_row(t, rows.data() + r * rb, b.data(), n_in);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), n_in * sizeof(float)), 0) << type_label(t) << " row " << r;
    }
  }
}

TEST(Interleave, RejectsBlocksShorterThanAWord) {
  std::vector<uint8_t> w(2 * 16 * 2);
  EXPECT_THROW(interleave_rows(TensorType::F16, w.data(), 2, 16), std::invalid_argument);
}

TEST(Interleave, MatmulRefusesALayoutWithoutKernels) {
  const int64_t n_in = 64, n_out = 16;
  std::vector<uint8_t> w = test::random_weights(TensorType::Q5_0, n_out, n_in, 3);
  const WeightMatrix m{TensorType::Q5_0, w.data(), n_in, n_out, quant_row_bytes(TensorType::Q5_0, n_in), true};
  std::vector<float> x(n_in), y(n_out);
  ThreadPool pool(1);
  MatmulScratch scratch;
  EXPECT_THROW(matmul(m, x.data(), 1, n_in, y.data(), n_out, pool, scratch), std::invalid_argument);
  EXPECT_THROW(matmul_ref(m, x.data(), 1, n_in, y.data(), n_out), std::invalid_argument);
}

// Both layouts, the same rows of x as one batch: every output bitwise equal.
void expect_same(const Pair& p, const std::vector<float>& x, int64_t first, int64_t count, int threads,
                 const std::string& what) {
  const std::vector<float> a = run(p.row_matrix, x, first, count, threads);
  const std::vector<float> b = run(p.interleaved_matrix, x, first, count, threads);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
        << what << ": " << count << " rows, " << threads << " threads, output " << i % p.row_matrix.n_out
        << " of row " << i / p.row_matrix.n_out << ": " << a[i] << " vs " << b[i];
  }
}

TEST(Interleave, MatmulIsBitwiseTheRowLayoutsOnRandomWeights) {
  const int64_t n_in = 768, n_out = 16 * 9 + 3;  // 3 super-blocks; 9 groups and a 3-row tail
  const int64_t rows = 40;
  const std::vector<float> x = random_floats(rows * n_in, 21);
  for (TensorType t : kInterleavedTypes) {
    if (!interleaved_kernels_available(t)) GTEST_SKIP() << "no interleaved kernels on this CPU (AVX-512 VNNI)";
    const Pair p = make_pair(t, n_in, n_out, test::random_weights(t, n_out, n_in, 17));
    const std::string label = type_label(t);
    for (int threads : {1, 2}) {
      expect_same(p, x, 0, 1, threads, label);
      expect_same(p, x, 5, 2, threads, label);
      expect_same(p, x, 3, 3, threads, label);
      expect_same(p, x, 8, 8, threads, label);
      expect_same(p, x, 1, 12, threads, label);  // VNNI rows kernel: passes of 8 and 4
      expect_same(p, x, 4, 16, threads, label);
      expect_same(p, x, 2, 17, threads, label);  // AMX tiles from here on, where there are tiles
      expect_same(p, x, 0, rows, threads, label);
    }
  }
}

// Q8_0/Q4_0 rows longer than one slice of the batch tile (32 blocks; 72 here: two whole slices and a
// short one), whose sums each slice continues: bitwise the scalar reference (which both layouts' batch
// kernels would miss together), in decode, the rows kernel and the tile.
TEST(Interleave, MatmulIsBitwiseTheReferenceOnRowsOfSeveralSlices) {
  const int64_t n_in = 2304, n_out = 16 * 3 + 5, rows = 40;
  const std::vector<float> x = random_floats(rows * n_in, 41);
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0}) {
    if (!interleaved_kernels_available(t)) GTEST_SKIP() << "no interleaved kernels on this CPU (AVX-512 VNNI)";
    const Pair p = make_pair(t, n_in, n_out, test::random_weights(t, n_out, n_in, 43));
    for (int64_t count : {int64_t{1}, int64_t{5}, int64_t{12}, rows}) {
      std::vector<float> want(count * n_out);
      matmul_ref(p.row_matrix, x.data(), count, n_in, want.data(), n_out);
      for (int threads : {1, 2}) {
        const std::vector<float> got = run(p.interleaved_matrix, x, 0, count, threads);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
              << type_label(t) << ": " << count << " rows, " << threads << " threads, output " << i % n_out
              << " of row " << i / n_out << ": " << got[i] << " vs " << want[i];
        }
      }
    }
  }
}

// Decode reads the groups as one stream or two (decode_streams.h): bitwise the same outputs either way,
// an even and an odd number of groups per chunk included.
TEST(Interleave, DecodeIsBitwiseTheSameInOneOrTwoStreams) {
  const std::vector<float> x = random_floats(1024, 25);
  for (TensorType t : kInterleavedTypes) {
    if (!interleaved_kernels_available(t)) GTEST_SKIP() << "no interleaved kernels on this CPU (AVX-512 VNNI)";
    for (int64_t n_out : {16, 16 * 7, 16 * 300 + 5}) {
      const Pair p = make_pair(t, 1024, n_out, test::random_weights(t, n_out, 1024, 27));
      const std::string label = std::string(type_label(t)) + " " + std::to_string(n_out) + " rows";
      set_decode_streams(1);
      const std::vector<float> one = run(p.interleaved_matrix, x, 0, 1, 1);
      set_decode_streams(2);
      const std::vector<float> two = run(p.interleaved_matrix, x, 0, 1, 2);
      set_decode_streams(0);
      const std::vector<float> rows = run(p.row_matrix, x, 0, 1, 1);
      ASSERT_EQ(std::memcmp(one.data(), rows.data(), one.size() * sizeof(float)), 0) << label << ": one stream";
      ASSERT_EQ(std::memcmp(two.data(), rows.data(), two.size() * sizeof(float)), 0) << label << ": two streams";
    }
  }
}

// The choice is open until the timed calls end, then fixed at 1 or 2; set_decode_streams fixes it.
TEST(Interleave, DecodeStreamsAreChosenFromTheCallsTimes) {
  if (!interleaved_kernels_available(TensorType::Q8_0)) GTEST_SKIP() << "no interleaved kernels on this CPU";
  const int64_t n_in = 512, n_out = 16 * 8;
  const Pair p = make_pair(TensorType::Q8_0, n_in, n_out, test::random_weights(TensorType::Q8_0, n_out, n_in, 31));
  const std::vector<float> x = random_floats(n_in, 33);
  set_decode_streams(0);
  EXPECT_EQ(decode_streams_chosen(), 0);
  for (int call = 0; call < 4096 && decode_streams_chosen() == 0; ++call) run(p.interleaved_matrix, x, 0, 1, 1);
  const int chosen = decode_streams_chosen();
  EXPECT_TRUE(chosen == 1 || chosen == 2) << chosen;
  set_decode_streams(2);
  EXPECT_EQ(decode_streams_chosen(), 2);
  set_decode_streams(0);
}

// A matrix large enough that decode and prefill split it into several chunks per thread.
TEST(Interleave, MatmulIsBitwiseTheRowLayoutsAcrossChunks) {
  const int64_t n_in = 1024, n_out = 16 * 300 + 7;
  const std::vector<float> x = random_floats(20 * n_in, 23);
  for (TensorType t : kInterleavedTypes) {
    if (!interleaved_kernels_available(t)) GTEST_SKIP() << "no interleaved kernels on this CPU (AVX-512 VNNI)";
    const Pair p = make_pair(t, n_in, n_out, test::random_weights(t, n_out, n_in, 19));
    expect_same(p, x, 0, 1, 2, type_label(t));
    expect_same(p, x, 0, 20, 2, type_label(t));
  }
}

// Weights and activations at the integer extremes (codes and scales at their maximum, activation codes
// −128 and −127): the exact integer sums are at their largest, beyond 2^24 for Q4_K, where a kernel that
// lost exactness would round differently from the row layout's.
TEST(Interleave, MatmulIsBitwiseTheRowLayoutsAtTheIntegerExtremes) {
  const int64_t n_in = 512, n_out = 32, rows = 40;  // 9 rows: the rows kernel; 40: the tiles
  // Q8_K (Q8_0 for Q8_0, Q4_0): every code −128 (−127) but one less per 32, so that the sums are odd: a
  // float sum that passed 2^24 would round.
  std::vector<float> x(rows * n_in, -1.0f);
  for (size_t k = 5; k < x.size(); k += 32) x[k] = -0.99f;
  for (TensorType t : kInterleavedTypes) {
    if (!interleaved_kernels_available(t)) GTEST_SKIP() << "no interleaved kernels on this CPU (AVX-512 VNNI)";
    const uint64_t rb = quant_row_bytes(t, n_in);
    std::vector<uint8_t> w(rb * n_out);
    for (int64_t b = 0; b < n_out * n_in / block_elements(t); ++b) {
      const auto k_quant = [](auto& q) {
        q.d = 0x3C00;  // 1.0
        q.dmin = 0;
        for (int j = 0; j < 4; ++j) q.scales[j] = 0xFF;      // sc 0..3 = 63, top bits of sc 4..7
        for (int j = 4; j < 8; ++j) q.scales[j] = 0x00;      // mins 0
        for (int j = 8; j < 12; ++j) q.scales[j] = 0x0F;     // sc 4..7 = 63
        std::memset(q.qs, 0xFF, sizeof(q.qs));               // codes 15
      };
      if (t == TensorType::Q8_0) {
        BlockQ8_0& q = reinterpret_cast<BlockQ8_0*>(w.data())[b];
        q.d = 0x3C00;
        std::memset(q.qs, 0x80, sizeof(q.qs));               // codes −128
      } else if (t == TensorType::Q4_0) {
        BlockQ4_0& q = reinterpret_cast<BlockQ4_0*>(w.data())[b];
        q.d = 0x3C00;
        std::memset(q.qs, 0x00, sizeof(q.qs));               // codes −8
      } else if (t == TensorType::Q4_K) {
        k_quant(reinterpret_cast<BlockQ4_K*>(w.data())[b]);
      } else if (t == TensorType::Q5_K) {
        BlockQ5_K& q = reinterpret_cast<BlockQ5_K*>(w.data())[b];
        k_quant(q);
        std::memset(q.qh, 0xFF, sizeof(q.qh));               // codes 31
      } else {
        BlockQ6_K& q = reinterpret_cast<BlockQ6_K*>(w.data())[b];
        std::memset(q.ql, 0xFF, sizeof(q.ql));               // codes 63
        std::memset(q.qh, 0xFF, sizeof(q.qh));
        std::memset(q.scales, 0x80, sizeof(q.scales));       // scales −128
        q.d = 0x3C00;
      }
    }
    const Pair p = make_pair(t, n_in, n_out, w);
    expect_same(p, x, 0, 1, 1, std::string(type_label(t)) + " extremes");
    expect_same(p, x, 0, 9, 1, std::string(type_label(t)) + " extremes");
    expect_same(p, x, 0, rows, 1, std::string(type_label(t)) + " extremes");
    expect_same(p, x, 0, rows, 2, std::string(type_label(t)) + " extremes");
    // The row layout's batch (AMX tiles over gathered rows) against its own decode kernel, too.
    const std::vector<float> one = run(p.row_matrix, x, 0, 1, 1), batch = run(p.row_matrix, x, 0, rows, 1);
    ASSERT_EQ(std::memcmp(one.data(), batch.data(), one.size() * sizeof(float)), 0) << type_label(t);
  }
}

// llama.cpp's blocks (the tiny reference models): real scales and mins, not just our writer's.
TEST(Interleave, MatmulIsBitwiseTheRowLayoutsOnLlamaCppBlocks) {
  INFER_REQUIRE_DIR(infer::test::reference_dir() + "/models");
  int checked = 0;
  for (const char* model : {"q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"}) {
    const auto file = gguf::File::open(infer::test::reference_dir() + "/models/tiny-llama-" + model + ".gguf");
    for (const auto& t : file->tensors()) {
      const bool interleavable = t.type == TensorType::Q8_0 || t.type == TensorType::Q4_0 ||
                                 t.type == TensorType::Q4_K || t.type == TensorType::Q5_K || t.type == TensorType::Q6_K;
      if (t.n_dims != 2 || !interleavable) continue;
      if (!interleaved_kernels_available(t.type)) GTEST_SKIP() << "no interleaved kernels on this CPU (AVX-512 VNNI)";
      const Pair p = make_pair(t.type, t.ne[0], t.ne[1], std::vector<uint8_t>(t.data, t.data + t.n_bytes));
      const std::vector<float> x = random_floats(40 * t.ne[0], 29);
      expect_same(p, x, 0, 1, 2, t.name);
      expect_same(p, x, 0, 9, 2, t.name);
      expect_same(p, x, 0, 40, 2, t.name);  // the tiles
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace infer::kernels
