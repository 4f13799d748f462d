// The quantised KV cache types (kernels/ops/kv_type.h): rows stored as GGUF's Q8_0 / Q4_0 blocks, read back
// exactly by the reference reader, and each optimised attention kernel (AVX2, AVX-512) against the
// scalar reference on random rows and on the real keys and values a model leaves in its pages, with
// the tolerance the F16 kernels are held to; blocks of rows bitwise equal to each row alone; Q8_0
// keys' integer scores bitwise the reference's in every kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "forward_harness.h"
#include "kernel_test_util.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/key_lanes.h"
#include "kernels/ops/kv_type.h"
#include "kernels/ops/ops.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx512/ops_avx512.h"
#include "kernels/quant/quant.h"
#include "model/model.h"
#include "reference_data.h"
#include "support/data_dirs.h"

namespace infer::kernels {
namespace {

using test_util::have_avx2;
using test_util::random_vec;

constexpr KvType kQuantTypes[] = {KvType::Q8_0, KvType::Q4_0};

// A paged pool of one layer with rows of `type` in heads of head_dim (keys in lanes where
// keys_in_lanes); page table scrambled.
struct TypedKv {
  KvType type;
  int kv_dim, head_dim, page_tokens, n_pages;
  int64_t row;  // 2-byte units of a row
  std::vector<uint16_t> mem;
  std::vector<int32_t> table;
  int64_t stride() const { return 2 * page_tokens * row; }
  uint16_t* k() { return mem.data(); }
  uint16_t* v() { return mem.data() + page_tokens * row; }
  TypedKv(KvType t, int dim, int head, int tokens, int pages)
      : type(t), kv_dim(dim), head_dim(head), page_tokens(tokens), n_pages(pages), row(kv_row_halves(t, dim)),
        mem(size_t(2 * tokens * kv_row_halves(t, dim) * pages), 0) {
    for (int i = 0; i < n_pages; ++i) table.push_back((i * 5 + 3) % n_pages);  // n_pages coprime with 5
  }
  PagedKv view() {
    PagedKv v{k(), this->v(), stride(), page_tokens, table.data(), row};
    v.type = type;
    return v;
  }
  void fill(int n_keys, uint32_t seed) {
    for (int j = 0; j < n_keys; ++j) {
      const auto kr = random_vec(size_t(kv_dim), seed + uint32_t(j)), vr = random_vec(size_t(kv_dim), seed + 7919 + uint32_t(j));
      kv_store(kr.data(), vr.data(), type, k(), v(), stride(), row, page_tokens, table.data(), kv_dim, head_dim, j);
    }
  }
};

TEST(KvType, NamesRowSizesAndFit) {
  EXPECT_EQ(parse_kv_type("Q8_0"), KvType::Q8_0);
  EXPECT_EQ(parse_kv_type("q4_0"), KvType::Q4_0);
  EXPECT_EQ(parse_kv_type("f16"), KvType::F16);
  EXPECT_THROW(parse_kv_type("q4_k"), std::invalid_argument);
  EXPECT_THROW(parse_kv_type(std::string("f16\0x", 5)), std::invalid_argument);
  EXPECT_STREQ(kv_type_name(KvType::Q4_0), "q4_0");
  // 2-byte units: GGUF's 34-byte Q8_0 and 18-byte Q4_0 blocks of 32
  EXPECT_EQ(kv_row_halves(KvType::F16, 1024), 1024);
  EXPECT_EQ(kv_row_halves(KvType::Q8_0, 1024) * 2, int64_t(1024 / 32 * 34));
  EXPECT_EQ(kv_row_halves(KvType::Q4_0, 1024) * 2, int64_t(1024 / 32 * 18));
  EXPECT_TRUE(kv_type_fits(KvType::Q8_0, 32));
  EXPECT_FALSE(kv_type_fits(KvType::Q4_0, 48));
  EXPECT_TRUE(kv_type_fits(KvType::F16, 48));
}

// A stored row is GGUF's block encoding of it (quantize_row), and kv_element reads back what
// dequantize_row gives, element by element, also from inside a block (heads narrower than a block).
TEST(KvType, StoredRowsAreGgufBlocksReadBackExactly) {
  const struct { KvType kv; gguf::TensorType t; } types[] = {{KvType::Q8_0, gguf::TensorType::Q8_0},
                                                            {KvType::Q4_0, gguf::TensorType::Q4_0}};
  for (const auto& [kv_type, tensor_type] : types) {
    TypedKv kv(kv_type, 64, 8, 4, 3);
    const auto k = random_vec(64, 1, 3.f), v = random_vec(64, 2, 0.01f);
    kv_store(k.data(), v.data(), kv_type, kv.k(), kv.v(), kv.stride(), kv.row, 4, kv.table.data(), 64, 8, 6);  // page 1, row 2
    std::vector<uint16_t> blocks(size_t(kv.row));
    quantize_row(tensor_type, k.data(), blocks.data(), 64);
    const int64_t at = kv.table[1] * kv.stride() + 2 * kv.row;
    EXPECT_EQ(0, std::memcmp(kv.k() + at, blocks.data(), size_t(kv.row) * 2)) << kv_type_name(kv_type);
    std::vector<float> back(64);
    dequantize_row(tensor_type, blocks.data(), back.data(), 64);
    for (int first : {0, 8, 24, 40}) {  // a head of 8 starting there
      const PagedKv head = kv_head(kv.view(), first);
      const uint16_t* row = head.k_base + (at - 0);
      for (int d = 0; d < 8; ++d) EXPECT_EQ(kv_element(row, kv_type, head.head_elem, d), back[size_t(first + d)]);
    }
  }
}

// An AVX2 row quantiser (kv_store's path on AVX2 machines) against the reference (quantize_row): 20
// random rows of several scales and then `edges` (its length the row's), each stored twice, one after
// the other, by both; the bits must be the same.
void expect_avx2_rows_are_reference_bits(KvType type, gguf::TensorType tensor_type,
                                         void (*avx2_row)(const float*, uint16_t*, int), const std::vector<float>& edges) {
  const int kv_dim = int(edges.size());
  std::vector<std::vector<float>> rows;
  for (uint32_t seed = 0; seed < 20; ++seed) rows.push_back(random_vec(size_t(kv_dim), seed, seed % 2 ? 1e-3f : 40.f));
  rows.push_back(edges);
  for (const auto& x : rows) {
    std::vector<uint16_t> ref(size_t(kv_row_halves(type, kv_dim)) * 2), got(ref.size());
    quantize_row(tensor_type, x.data(), ref.data(), kv_dim);
    quantize_row(tensor_type, x.data(), ref.data() + ref.size() / 2, kv_dim);
    avx2_row(x.data(), got.data(), kv_dim);
    avx2_row(x.data(), got.data() + got.size() / 2, kv_dim);
    EXPECT_EQ(0, std::memcmp(ref.data(), got.data(), ref.size() * 2)) << kv_type_name(type);
  }
}

// Q8_0's edges: an all-zero block, and ties (x · 127 / amax exactly k + 0.5, which roundf takes away
// from zero) of both signs.
TEST(KvType, Avx2Q8_0RowsAreTheReferenceBits) {
  if (!have_avx2()) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  std::vector<float> ties(256, 0.f);
  for (int i = 32; i < 256; ++i) ties[size_t(i)] = float((i % 2 ? 1 : -1) * (i % 127)) + (i % 3 ? 0.5f : 0.f);
  for (int b = 1; b < 256 / 32; ++b) ties[size_t(32 * b)] = 127.f;  // amax 127: the multiplier is 1
  expect_avx2_rows_are_reference_bits(KvType::Q8_0, gguf::TensorType::Q8_0, kv_store_q8_0_row_avx2, ties);
}

// Q4_0's edges: an all-zero block with a negative zero first (the scale stays +0's), a block whose
// largest magnitude appears with both signs (the first sets the scale's sign), and values that land
// on x · id + 8.5 = 16 (code 15).
TEST(KvType, Avx2Q4_0RowsAreTheReferenceBits) {
  if (!have_avx2()) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  std::vector<float> edges(256, 0.f);
  edges[32] = -0.f;
  for (int i = 64; i < 96; ++i) edges[size_t(i)] = float(i % 7) - 3.f;
  edges[70] = -5.f;
  edges[75] = 5.f;
  for (int i = 96; i < 128; ++i) edges[size_t(i)] = i % 2 ? 8.f : -8.f;
  for (int i = 128; i < 256; ++i) edges[size_t(i)] = float(i % 17) * 0.125f - 1.f;
  expect_avx2_rows_are_reference_bits(KvType::Q4_0, gguf::TensorType::Q4_0, kv_store_q4_0_row_avx2, edges);
}

// Element d of key `key` (an absolute key number) of a head whose keys are in lanes.
float lane_key_element(const KeyLanes& keys, int key, int d) {
  const uint8_t* chunk = keys.chunk(key / keys.page_tokens);
  const int t = key % keys.page_tokens, b = d / kKvBlockElements, i = d % kKvBlockElements;
  return float(keys.code(chunk, b, t, i)) * f16_to_f32(keys.scales(chunk, b)[t]);
}

// Q8_0 and Q4_0 keys in heads of whole blocks are stored in lanes (key_lanes.h): every head's element
// reads back as GGUF's block encoding of the row gives it, in pages of 16, 5 and 1 tokens; the values
// stay rows of GGUF blocks; keys in heads narrower than a block stay rows.
TEST(KvType, KeysInLanesReadBackAsTheirBlocks) {
  for (KvType t : kQuantTypes) {
    EXPECT_TRUE(keys_in_lanes(t, 32));
    EXPECT_TRUE(keys_in_lanes(t, 256));
    EXPECT_FALSE(keys_in_lanes(t, 288));
    EXPECT_FALSE(keys_in_lanes(t, 16));
  }
  EXPECT_FALSE(keys_in_lanes(KvType::F16, 128));
  const struct { KvType kv; gguf::TensorType t; } types[] = {{KvType::Q8_0, gguf::TensorType::Q8_0},
                                                            {KvType::Q4_0, gguf::TensorType::Q4_0}};
  for (const auto& [kv_type, tensor_type] : types) {
    for (int page_tokens : {16, 5, 1}) {
      const int hd = 64, kv_dim = 3 * hd, n_keys = 23;
      TypedKv kv(kv_type, kv_dim, hd, page_tokens, (n_keys + page_tokens - 1) / page_tokens + 1), ref = kv;
      const std::string what = std::string(kv_type_name(kv_type)) + ", pages of " + std::to_string(page_tokens);
      std::vector<std::vector<float>> keys_back;
      for (int j = 0; j < n_keys; ++j) {
        const auto k = random_vec(size_t(kv_dim), uint32_t(40 + j), 3.f), v = random_vec(size_t(kv_dim), uint32_t(90 + j));
        kv_store(k.data(), v.data(), kv_type, kv.k(), kv.v(), kv.stride(), kv.row, page_tokens, kv.table.data(),
                 kv_dim, hd, j);
        kv_store_ref(k.data(), v.data(), kv_type, ref.k(), ref.v(), ref.stride(), ref.row, page_tokens,
                     ref.table.data(), kv_dim, hd, j);
        std::vector<uint16_t> blocks(size_t(kv.row));
        std::vector<float> back(static_cast<size_t>(kv_dim));
        quantize_row(tensor_type, k.data(), blocks.data(), kv_dim);
        dequantize_row(tensor_type, blocks.data(), back.data(), kv_dim);
        keys_back.push_back(back);
        quantize_row(tensor_type, v.data(), blocks.data(), kv_dim);
        const int64_t at = kv.table[size_t(j / page_tokens)] * kv.stride() + (j % page_tokens) * kv.row;
        EXPECT_EQ(0, std::memcmp(kv.v() + at, blocks.data(), size_t(kv.row) * 2)) << "value " << j << ", " << what;
      }
      EXPECT_EQ(kv.mem, ref.mem) << "kv_store against kv_store_ref, " << what;
      for (int g = 0; g < kv_dim / hd; ++g) {
        const KeyLanes keys(kv_head(kv.view(), int64_t(g) * hd), hd);
        for (int j = 0; j < n_keys; ++j) {
          for (int d = 0; d < hd; ++d) {
            ASSERT_EQ(lane_key_element(keys, j, d), keys_back[size_t(j)][size_t(g * hd + d)])
                << "head " << g << " key " << j << " element " << d << ", " << what;
          }
        }
      }
    }
  }
}

struct Shape {
  int n_head, n_kv, hd, n_keys;
};

void expect_near_reference(const PagedKv& kv, const Shape& sh, bool avx512, const std::string& what) {
  const auto q = random_vec(size_t(sh.n_head * sh.hd), uint32_t(sh.hd * 31 + sh.n_keys));
  std::vector<float> ref(q.size()), got(q.size()), scratch(size_t(attention_rows_scratch(1, sh.n_head / sh.n_kv, sh.n_keys)));
  const float scale = 1.f / std::sqrt(float(sh.hd));
  PagedKv row = kv;
  attention_row_ref(q.data(), row, sh.n_keys, sh.n_head, sh.n_kv, sh.hd, scale, ref.data(), scratch.data());
  if (avx512) {
    attention_row_avx512(q.data(), row, sh.n_keys, sh.n_head, sh.n_kv, sh.hd, scale, got.data(), scratch.data());
  } else {
    attention_row_avx2(q.data(), row, sh.n_keys, sh.n_head, sh.n_kv, sh.hd, scale, got.data(), scratch.data());
  }
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 2e-6f) << what << " element " << i;
}

std::string describe(KvType t, const Shape& sh, int page_tokens) {
  return std::string(kv_type_name(t)) + " heads " + std::to_string(sh.n_head) + "/" + std::to_string(sh.n_kv) + " hd " +
         std::to_string(sh.hd) + " keys " + std::to_string(sh.n_keys) + " page " + std::to_string(page_tokens);
}

// Heads of 8 and 16 (several to a block), 24 (across blocks), 32 to 256; key counts around the
// kernels' groups of 8 and 16; pages of 16, 5 and 1.
TEST(KvTypeAttention, Avx2MatchesReference) {
  if (!have_avx2()) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  for (KvType t : kQuantTypes) {
    for (const Shape sh : {Shape{8, 4, 8, 1}, Shape{8, 4, 8, 70}, Shape{4, 2, 16, 19}, Shape{8, 4, 24, 45},
                           Shape{8, 2, 32, 33}, Shape{4, 2, 64, 17}, Shape{4, 2, 128, 300}, Shape{2, 1, 256, 9}}) {
      for (int page_tokens : {16, 5, 1}) {
        TypedKv kv(t, sh.n_kv * sh.hd, sh.hd, page_tokens, (sh.n_keys + page_tokens - 1) / page_tokens + 2);
        kv.fill(sh.n_keys, uint32_t(sh.hd));
        expect_near_reference(kv.view(), sh, false, describe(t, sh, page_tokens));
      }
    }
  }
}

TEST(KvTypeAttention, Avx512MatchesReference) {
  if (!use_avx512()) GTEST_SKIP() << "AVX-512 not in use here";
  for (KvType t : kQuantTypes) {
    for (const Shape sh : {Shape{2, 1, 64, 1}, Shape{8, 2, 64, 15}, Shape{4, 2, 128, 17}, Shape{16, 8, 128, 70},
                           Shape{3, 1, 128, 300}, Shape{2, 2, 256, 33}}) {
      for (int page_tokens : {16, 5, 1}) {
        TypedKv kv(t, sh.n_kv * sh.hd, sh.hd, page_tokens, (sh.n_keys + page_tokens - 1) / page_tokens + 2);
        kv.fill(sh.n_keys, uint32_t(sh.hd + 1));
        expect_near_reference(kv.view(), sh, true, describe(t, sh, page_tokens));
      }
    }
  }
}

// Q8_0 and Q4_0 keys in heads of whole blocks are scored by integer dots with the query quantised
// (q8_0_scores.h): the AVX2 and AVX-512 kernels give the reference's bits, for heads of one to eight
// blocks, key counts around the kernels' groups of 8 and 16, pages of 16, 5 and 1, a query with an
// all-zero block and one with a single large element. Each score stays within the quantisation's
// error of the exact dot of the stored keys.
TEST(KvTypeAttention, LaneScoresAreTheReferenceBitsInEveryKernel) {
  for (KvType type : kQuantTypes) {
    for (const auto& [n_gqa, hd, n_keys] : {std::tuple{1, 32, 1}, {2, 32, 9}, {3, 64, 17}, {2, 96, 40}, {2, 128, 70},
                                             {5, 128, 33}, {1, 256, 300}, {2, 256, 16}}) {
      for (int page_tokens : {16, 5, 1}) {
        TypedKv kv(type, 2 * hd, hd, page_tokens, (n_keys + 3 + page_tokens - 1) / page_tokens + 2);
        kv.fill(n_keys + 3, uint32_t(hd + n_keys));
        PagedKv head = kv_head(kv.view(), hd);  // the second KV head
        head.first_key = 3;
        auto q = random_vec(size_t(n_gqa * hd), uint32_t(hd * 7 + n_keys), 2.f);
        std::fill_n(q.begin(), 32, 0.f);  // an all-zero block
        if (n_gqa > 1) q[size_t(hd + 5)] = 300.f;
        const std::string what = std::string(kv_type_name(type)) + ", " + std::to_string(n_gqa) + " heads of " +
                                 std::to_string(hd) + ", " + std::to_string(n_keys) + " keys, pages of " +
                                 std::to_string(page_tokens);
        const size_t n = size_t(n_gqa * n_keys);
        std::vector<float> ref(n + 7), got(n + 7);
        q8_0_scores_ref(q.data(), head, n_keys, n_gqa, hd, 0.25f, ref.data());
        const KeyLanes keys(head, hd);
        for (int h = 0; h < n_gqa; ++h) {
          for (int j = 0; j < n_keys; ++j) {
            const int key = head.first_key + j;
            // each query element moves by at most half its block's step, amax / 127 / 2
            double exact = 0, bound = 0;
            for (int b = 0; b < hd / 32; ++b) {
              double amax = 0, k_sum = 0;
              for (int d = 32 * b; d < 32 * b + 32; ++d) {
                const double qd = q[size_t(h * hd + d)], kd = lane_key_element(keys, key, d);
                exact += qd * kd;
                amax = std::max(amax, std::fabs(qd));
                k_sum += std::fabs(kd);
              }
              bound += amax / 254 * k_sum * (1 + 1e-4);
            }
            ASSERT_NEAR(ref[size_t(h * n_keys + j)], 0.25 * exact, 0.25 * bound + 1e-6) << what;
          }
        }
        if (have_avx2()) {
          q8_0_scores_avx2(q.data(), head, n_keys, n_gqa, hd, 0.25f, got.data());
          EXPECT_EQ(0, std::memcmp(ref.data(), got.data(), n * sizeof(float))) << "AVX2, " << what;
        }
        if (use_avx512() && attention_avx512_supports(hd)) {
          std::fill(got.begin(), got.end(), -1.f);
          q8_0_scores_avx512(q.data(), head, n_keys, n_gqa, hd, 0.25f, got.data());
          EXPECT_EQ(0, std::memcmp(ref.data(), got.data(), n * sizeof(float))) << "AVX-512, " << what;
          EXPECT_EQ(got[n], -1.f) << "AVX-512 wrote past the scores, " << what;
        }
      }
    }
  }
}

// A block of rows gives each row the bits of that row alone, for the second KV head (inside a block
// when heads are narrow), as the forward pass calls it.
TEST(KvTypeAttention, RowsOfABlockEqualEachRowAloneBitwise) {
  const int first_key[] = {0, 0, 3, 0, 0}, end[] = {13, 14, 15, 16, 290};
  for (KvType t : kQuantTypes) {
    for (const auto& [n_gqa, hd] : {std::pair{2, 8}, {1, 16}, {3, 32}, {2, 64}, {5, 128}, {1, 256}}) {
      TypedKv kv(t, std::max(2 * hd, 32), hd, 16, 300 / 16 + 2);  // rows of whole blocks
      kv.fill(300, 11);
      const PagedKv head = kv_head(kv.view(), hd);
      const int n_rows = 5;
      const int64_t stride = int64_t(n_gqa) * hd + 3;
      const auto q = random_vec(size_t(n_rows * stride), uint32_t(hd));
      std::vector<float> block(q.size(), -1.f), alone(q.size(), -1.f);
      std::vector<float> scratch(size_t(attention_rows_scratch(n_rows, n_gqa, 300)));
      attention_rows(AttentionRows{q.data(), stride, block.data(), stride, first_key, end, n_rows}, head, n_gqa, hd,
                     0.3f, scratch.data());
      for (int i = 0; i < n_rows; ++i) {
        PagedKv row = head;
        row.first_key = first_key[i];
        attention_row(q.data() + i * stride, row, end[i] - first_key[i], n_gqa, 1, hd, 0.3f, alone.data() + i * stride,
                      scratch.data());
      }
      EXPECT_EQ(0, std::memcmp(block.data(), alone.data(), block.size() * sizeof(float)))
          << kv_type_name(t) << " " << n_gqa << " heads of " << hd;
    }
  }
}

// The keys and values a real model leaves in its pages (a prompt through the forward pass), every
// layer: stories260K (heads of 8, four to a block) for AVX2; tiny-qwen3 (heads of 128) for both.
void check_real_pages(const std::string& path, bool avx512) {
  const auto model = model::Model::load(path);
  const model::HParams& hp = model->hparams();
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(int32_t(1 + (i * 37) % (hp.n_vocab - 1)));
  for (KvType t : kQuantTypes) {
    model::DeviceOptions options;
    options.kv_type = t;
    test::ForwardHarness h(*model, 1, 1, int(tokens.size()), 64, 16, options);
    h.feed(0, tokens);
    for (int l = 0; l < hp.n_layer; ++l) {
      const PagedKv kv = h.kv().view(l, h.page_table(0).data());
      expect_near_reference(kv, Shape{hp.n_head, hp.n_kv_head, hp.head_dim, int(tokens.size())}, avx512,
                            std::string(kv_type_name(t)) + " layer " + std::to_string(l));
    }
  }
}

TEST(KvTypeAttention, RealStories260KPagesAvx2MatchesReference) {
  if (!have_avx2()) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  INFER_REQUIRE_DIR(test::models_dir());
  check_real_pages(test::models_dir() + "/stories260K.gguf", false);
}

TEST(KvTypeAttention, RealQwen3PagesMatchReference) {
  INFER_REQUIRE_DIR(test::reference_dir());
  if (have_avx2()) check_real_pages(test::reference_model_path("tiny-qwen3-f32"), false);
  if (use_avx512()) check_real_pages(test::reference_model_path("tiny-qwen3-f32"), true);
}

// A pool whose model rows are not whole blocks is refused with the width.
TEST(KvType, PoolRefusesRowsThatAreNotWholeBlocks) {
  model::HParams hp;
  hp.n_layer = 2;
  hp.n_head = 4;
  hp.n_kv_head = 2;
  hp.head_dim = 12;
  hp.n_embd = 48;
  EXPECT_THROW(model::KvPool(hp, 16, 2, KvType::Q8_0), std::invalid_argument);
  hp.head_dim = 16;
  const model::KvPool q8(hp, 16, 2, KvType::Q8_0), f16(hp, 16, 2);
  EXPECT_EQ(model::KvPool::bytes_per_token(hp, KvType::Q8_0), uint64_t(2 * 2 * 34));
  EXPECT_EQ(model::KvPool::bytes_per_token(hp, KvType::F16), uint64_t(2 * 2 * 32 * 2));
  EXPECT_LT(q8.bytes(), f16.bytes());
}

}  // namespace
}  // namespace infer::kernels
