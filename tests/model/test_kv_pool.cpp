// KvPool: the page layout promised in kv_pool.h, sizes, and page copies for the prefix cache.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/ops/ops.h"
#include "kernels/quant/quant.h"
#include "model/kv_pool.h"

namespace infer::model {
namespace {

HParams shape() {
  HParams hp;
  hp.n_layer = 3;
  hp.n_head = 4;
  hp.n_kv_head = 2;
  hp.head_dim = 8;
  hp.n_embd = 32;
  return hp;
}

TEST(KvPool, SizeIsLayersTimesKAndVTimesPages) {
  const HParams hp = shape();
  KvPool kv(hp, 16, 5);
  const int64_t stride = int64_t(3) * 2 * 16 * 16 + KvPool::kPagePadHalves;
  EXPECT_EQ(kv.bytes(), uint64_t(stride) * 2 * 5);
  EXPECT_EQ(KvPool::bytes_for(hp, 16, 5), kv.bytes());
  EXPECT_EQ(kv.page_stride(), stride);
  // The pad is whole cache lines, and an odd number of them: pages land on different cache sets.
  EXPECT_EQ(KvPool::kPagePadHalves * 2 % 64, 0);
  EXPECT_EQ(KvPool::kPagePadHalves * 2 / 64 % 2, 1);
  EXPECT_EQ(kv.kv_dim(), 16);
  EXPECT_THROW(KvPool(hp, 0, 5), std::runtime_error);
}

TEST(KvPool, LayoutMatchesTheHeaderFormula) {
  const HParams hp = shape();
  KvPool kv(hp, 4, 3);
  const int D = kv.kv_dim(), T = kv.page_tokens();
  // k(p, l) = base + ((p * n_layer + l) * 2 + 0) * T * D; v = k + T * D
  uint16_t* base = kv.k_base(0);
  for (int l = 0; l < hp.n_layer; ++l) {
    EXPECT_EQ(kv.k_base(l), base + int64_t(l) * 2 * T * D);
    EXPECT_EQ(kv.v_base(l), kv.k_base(l) + int64_t(T) * D);
    const int32_t table[] = {2, 0};
    const kernels::PagedKv v = kv.view(l, table);
    EXPECT_EQ(v.k_base, kv.k_base(l));
    EXPECT_EQ(v.v_base, kv.v_base(l));
    EXPECT_EQ(v.page_stride, kv.page_stride());
    EXPECT_EQ(v.page_tokens, T);
    EXPECT_EQ(v.row_stride, D);
    EXPECT_EQ(v.type, kernels::KvType::F16);
    EXPECT_EQ(v.page_table, table);
  }
  // Page p of layer l: p * page_stride + l * 2 * T * D from the base.
  EXPECT_EQ(kv.k_base(1) + 2 * kv.page_stride(),
            base + 2 * (int64_t(3) * 2 * T * D + KvPool::kPagePadHalves) + int64_t(1) * 2 * T * D);
}

TEST(KvPool, CopyPageCopiesEveryLayersFirstRows) {
  const HParams hp = shape();
  KvPool kv(hp, 4, 3);
  const int D = kv.kv_dim();
  const int32_t from_table[] = {1}, to_table[] = {2};
  std::vector<float> k(static_cast<size_t>(D)), v(static_cast<size_t>(D)), zero(static_cast<size_t>(D), 0.f);
  for (int l = 0; l < hp.n_layer; ++l) {
    for (int pos = 0; pos < 4; ++pos) {
      for (int i = 0; i < D; ++i) k[size_t(i)] = float(l * 100 + pos * 10 + i), v[size_t(i)] = -k[size_t(i)];
      kernels::kv_store_ref(k.data(), v.data(), kernels::KvType::F16, kv.k_base(l), kv.v_base(l), kv.page_stride(), D, 4,
                            from_table, D, hp.head_dim, pos);
      kernels::kv_store_ref(zero.data(), zero.data(), kernels::KvType::F16, kv.k_base(l), kv.v_base(l), kv.page_stride(), D,
                            4, to_table, D, hp.head_dim, pos);
    }
  }
  kv.copy_page(1, 2, 3);
  for (int l = 0; l < hp.n_layer; ++l) {
    const uint16_t* kp = kv.k_base(l) + 2 * kv.page_stride();
    const uint16_t* vp = kv.v_base(l) + 2 * kv.page_stride();
    for (int pos = 0; pos < 4; ++pos) {
      const float want = pos < 3 ? float(l * 100 + pos * 10 + 5) : 0.f;
      EXPECT_EQ(kernels::f16_to_f32(kp[pos * D + 5]), want) << "layer " << l << " pos " << pos;
      EXPECT_EQ(kernels::f16_to_f32(vp[pos * D + 5]), -want) << "layer " << l << " pos " << pos;
    }
  }
  EXPECT_THROW(kv.copy_page(0, 3, 1), std::out_of_range);
  EXPECT_THROW(kv.copy_page(0, 1, 5), std::out_of_range);
}

// Keys in lanes (Q8_0 and Q4_0, kernels/ops/key_lanes.h) interleave a page's tokens: a copy of its first
// rows gives the new page every copied key's scores, in every layer.
TEST(KvPool, CopyPageCopiesKeysInLanes) {
  for (const kernels::KvType type : {kernels::KvType::Q8_0, kernels::KvType::Q4_0}) {
    HParams hp = shape();
    hp.head_dim = 32;
    hp.n_embd = 128;
    KvPool kv(hp, 4, 3, type);
    const int D = kv.kv_dim();
    const int32_t from_table[] = {1}, to_table[] = {2};
    std::vector<float> k(static_cast<size_t>(D)), v(static_cast<size_t>(D));
    for (int l = 0; l < hp.n_layer; ++l) {
      for (int pos = 0; pos < 4; ++pos) {
        for (int i = 0; i < D; ++i) k[size_t(i)] = float((l * 7 + pos * 3 + i) % 11) - 5.f, v[size_t(i)] = 0.5f * k[size_t(i)];
        kernels::kv_store(k.data(), v.data(), type, kv.k_base(l), kv.v_base(l), kv.page_stride(), kv.row_stride(), 4,
                          from_table, D, hp.head_dim, pos);
      }
    }
    kv.copy_page(1, 2, 3);
    const std::vector<float> q(size_t(hp.head_dim), 0.25f);
    for (int l = 0; l < hp.n_layer; ++l) {
      for (int g = 0; g < hp.n_kv_head; ++g) {
        std::vector<float> from(3), to(3);
        kernels::q8_0_scores_ref(q.data(), kernels::kv_head(kv.view(l, from_table), int64_t(g) * hp.head_dim), 3, 1,
                                 hp.head_dim, 1.f, from.data());
        kernels::q8_0_scores_ref(q.data(), kernels::kv_head(kv.view(l, to_table), int64_t(g) * hp.head_dim), 3, 1,
                                 hp.head_dim, 1.f, to.data());
        EXPECT_EQ(from, to) << kernels::kv_type_name(type) << " layer " << l << " head " << g;
        EXPECT_NE(from[0], from[1]) << kernels::kv_type_name(type) << " layer " << l << " head " << g;
      }
    }
  }
}

}  // namespace
}  // namespace infer::model
