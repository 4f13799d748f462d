// The ops of kernels/ops/ops.h: each scalar reference against the formula it implements, and each AVX2
// version against its reference on random data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/ops.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx512/ops_avx512.h"
#include "kernels/quant/quant.h"

namespace infer::kernels {
namespace {

using test_util::have_avx2;
using test_util::random_vec;

#define REQUIRE_AVX2() \
  if (!have_avx2()) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C"

// ---------------- rmsnorm ----------------

TEST(RmsNorm, ReferenceMatchesDefinition) {
  const auto x = random_vec(100, 1, 3.f), w = random_vec(100, 2);
  std::vector<float> out(100);
  rmsnorm_ref(x.data(), w.data(), out.data(), 100, 1e-5f);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double r = 1.0 / std::sqrt(ss / 100 + 1e-5);
  for (int i = 0; i < 100; ++i) EXPECT_NEAR(out[size_t(i)], x[size_t(i)] * r * w[size_t(i)], 1e-5 * std::abs(x[size_t(i)] * r * w[size_t(i)]) + 1e-7);
}

TEST(RmsNorm, NullWeightMeansNoWeight) {
  const auto x = random_vec(16, 3);
  std::vector<float> ones(16, 1.f), a(16), b(16);
  rmsnorm_ref(x.data(), nullptr, a.data(), 16, 1e-6f);
  rmsnorm_ref(x.data(), ones.data(), b.data(), 16, 1e-6f);
  EXPECT_EQ(a, b);
}

TEST(RmsNorm, Avx2MatchesReference) {
  REQUIRE_AVX2();
  for (int64_t n : {1, 7, 8, 64, 172, 1000, 4096}) {
    const auto x = random_vec(size_t(n), uint32_t(n), 2.f), w = random_vec(size_t(n), uint32_t(n + 1));
    std::vector<float> ref(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    rmsnorm_ref(x.data(), w.data(), ref.data(), n, 1e-5f);
    rmsnorm_avx2(x.data(), w.data(), got.data(), n, 1e-5f);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[size_t(i)], ref[size_t(i)], 2e-6f * std::abs(ref[size_t(i)]) + 1e-9f) << n;
  }
}

TEST(RmsNorm, InPlaceIsAllowed) {
  auto x = random_vec(40, 4);
  std::vector<float> expect(40);
  rmsnorm(x.data(), nullptr, expect.data(), 40, 1e-6f);
  rmsnorm(x.data(), nullptr, x.data(), 40, 1e-6f);
  EXPECT_EQ(x, expect);
}

// ---------------- rope ----------------

// The rotation written from the spec's formula in double, with a direct pow for each frequency.
std::vector<double> rope_formula(const std::vector<float>& head, int pos, int n_rot, double base, bool neox) {
  std::vector<double> out(head.begin(), head.end());
  for (int i = 0; i < n_rot / 2; ++i) {
    const double theta = pos * std::pow(base, -2.0 * i / n_rot);
    const int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
    out[size_t(a)] = head[size_t(a)] * std::cos(theta) - head[size_t(b)] * std::sin(theta);
    out[size_t(b)] = head[size_t(a)] * std::sin(theta) + head[size_t(b)] * std::cos(theta);
  }
  return out;
}

TEST(Rope, NormalModeRotatesAdjacentPairs) {
  const auto head = random_vec(32, 5);
  auto got = head;
  rope_ref(got.data(), 32, 7, RopeParams{32, 10000.f, 1.f, false});
  const auto want = rope_formula(head, 7, 32, 10000.0, false);
  for (size_t i = 0; i < 32; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(Rope, NeoxModeRotatesHalves) {
  const auto head = random_vec(64, 6);
  auto got = head;
  rope_ref(got.data(), 64, 11, RopeParams{64, 1e6f, 1.f, true});
  const auto want = rope_formula(head, 11, 64, 1e6, true);
  for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(Rope, PositionZeroIsIdentity) {
  const auto head = random_vec(16, 7);
  auto got = head;
  rope_ref(got.data(), 16, 0, RopeParams{16, 10000.f, 1.f, true});
  EXPECT_EQ(got, head);
}

TEST(Rope, DimsPastNRotPassThrough) {
  const auto head = random_vec(32, 8);
  auto got = head;
  rope_ref(got.data(), 32, 5, RopeParams{16, 10000.f, 1.f, false});
  for (size_t i = 16; i < 32; ++i) EXPECT_EQ(got[i], head[i]);
  EXPECT_NE(got[2], head[2]);
}

TEST(Rope, LinearScalingAndFreqFactorsScaleTheAngle) {
  // freq_scale 0.5 at position 8 equals no scaling at position 4 (angles are exact multiples here
  // only for pair 0, so compare pair 0); a factor of 2 on every frequency does the same.
  const auto head = random_vec(8, 9);
  auto scaled = head, half_pos = head, factored = head;
  std::vector<float> factors(4, 2.f);
  rope_ref(scaled.data(), 8, 8, RopeParams{8, 10000.f, 0.5f, false});
  rope_ref(half_pos.data(), 8, 4, RopeParams{8, 10000.f, 1.f, false});
  rope_ref(factored.data(), 8, 8, RopeParams{8, 10000.f, 1.f, false, factors.data()});
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(scaled[i], half_pos[i], 1e-6);
    EXPECT_NEAR(factored[i], half_pos[i], 1e-6);
  }
}

// LongRoPE's angles: theta_i / factor_i, with cos and sin scaled by the magnitude mscale, against the
// same angles in double (direct pow); f32 angles at position 300 stay within 1e-4 of it.
TEST(Rope, FactorsAndMscaleMatchDoublePrecisionAngles) {
  const int n_rot = 96, pos = 300;
  std::vector<float> factors(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) factors[size_t(i)] = 1.f + 31.f * float(i) / float(n_rot / 2 - 1);
  const float mscale = 1.1902380714f;  // phi4-mini's sqrt(1 + ln 32 / ln 4096)
  const RopeParams p{n_rot, 10000.f, 1.f, true, factors.data(), mscale};
  std::vector<float> c(size_t(n_rot / 2)), s(size_t(n_rot / 2));
  rope_angles(pos, p, c.data(), s.data());
  const auto head = random_vec(size_t(n_rot), 21);
  auto got = head;
  rope_ref(got.data(), n_rot, pos, p);
  for (int i = 0; i < n_rot / 2; ++i) {
    const double theta = pos * std::pow(10000.0, -2.0 * i / n_rot) / double(factors[size_t(i)]);
    const double wc = double(mscale) * std::cos(theta), ws = double(mscale) * std::sin(theta);
    EXPECT_NEAR(c[size_t(i)], wc, 1e-4) << i;
    EXPECT_NEAR(s[size_t(i)], ws, 1e-4) << i;
    const size_t a = size_t(i), b = size_t(i + n_rot / 2);
    EXPECT_NEAR(got[a], head[a] * wc - head[b] * ws, 5e-4) << i;
    EXPECT_NEAR(got[b], head[a] * ws + head[b] * wc, 5e-4) << i;
  }
}

// mscale multiplies the f32 cos/sin after they are formed: 2 (exact in binary) doubles every value.
TEST(Rope, MscaleScalesTheF32AnglesExactly) {
  std::vector<float> factors{1.f, 1.5f, 2.f, 4.f, 8.f, 16.f, 24.f, 32.f};
  for (bool neox : {false, true}) {
    const RopeParams plain{16, 10000.f, 0.5f, neox, factors.data()};
    RopeParams two = plain;
    two.mscale = 2.f;
    std::vector<float> c0(8), s0(8), c2(8), s2(8);
    rope_angles(4321, plain, c0.data(), s0.data());
    rope_angles(4321, two, c2.data(), s2.data());
    for (size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(c2[i], 2.f * c0[i]) << i;
      EXPECT_EQ(s2[i], 2.f * s0[i]) << i;
    }
  }
}

TEST(Rope, SplitFormEqualsWholeBitwise) {
  for (bool neox : {false, true}) {
    const RopeParams p{64, 1e6f, 1.f, neox};
    auto a = random_vec(64, 10), b = a;
    rope(a.data(), 64, 123, p);
    std::vector<float> c(32), s(32);
    rope_angles(123, p, c.data(), s.data());
    rope_apply(b.data(), c.data(), s.data(), p);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 64 * sizeof(float)));
  }
}

TEST(Rope, TooManyRotaryDimsIsRefused) {
  std::vector<float> head(2048, 1.f);
  EXPECT_THROW(rope(head.data(), 2048, 3, RopeParams{2048, 10000.f, 1.f, false}), std::invalid_argument);
}

TEST(Rope, Avx2MatchesReferenceBitwise) {
  REQUIRE_AVX2();
  for (bool neox : {false, true}) {
    for (int n_rot : {2, 8, 12, 32, 64, 128}) {
      const RopeParams p{n_rot, 10000.f, 1.f, neox};
      std::vector<float> c(size_t(n_rot / 2)), s(size_t(n_rot / 2));
      rope_angles(977, p, c.data(), s.data());
      auto a = random_vec(size_t(n_rot), uint32_t(n_rot)), b = a;
      rope_apply_ref(a.data(), c.data(), s.data(), p);
      rope_apply_avx2(b.data(), c.data(), s.data(), p);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "n_rot " << n_rot << " neox " << neox;
    }
  }
}

// ---------------- swiglu, softmax ----------------

TEST(SwiGlu, ReferenceMatchesDefinition) {
  const auto g = random_vec(50, 11, 4.f), u = random_vec(50, 12);
  std::vector<float> out(50);
  swiglu_ref(g.data(), u.data(), out.data(), 50);
  for (size_t i = 0; i < 50; ++i) {
    const double want = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
    EXPECT_NEAR(out[i], want, 1e-6 * std::abs(want) + 1e-7);
  }
}

TEST(SwiGlu, Avx2MatchesReference) {
  REQUIRE_AVX2();
  for (int64_t n : {1, 8, 13, 172, 768, 3000}) {
    auto g = random_vec(size_t(n), uint32_t(n), 5.f);
    if (n > 4) g[0] = 100.f, g[1] = -100.f, g[2] = 0.f, g[3] = -87.f;  // saturating inputs
    const auto u = random_vec(size_t(n), uint32_t(n + 7));
    std::vector<float> ref(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    swiglu_ref(g.data(), u.data(), ref.data(), n);
    swiglu_avx2(g.data(), u.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[size_t(i)], ref[size_t(i)], 1e-6f * std::abs(ref[size_t(i)]) + 1e-30f) << i;
  }
}

TEST(Softmax, ReferenceMatchesDefinition) {
  auto x = random_vec(37, 13, 10.f);
  const auto orig = x;
  softmax_ref(x.data(), 37);
  const double max = *std::max_element(orig.begin(), orig.end());
  double sum = 0;
  for (float v : orig) sum += std::exp(v - max);
  for (size_t i = 0; i < 37; ++i) EXPECT_NEAR(x[i], std::exp(orig[i] - max) / sum, 1e-6);
}

TEST(Softmax, Avx2MatchesReference) {
  REQUIRE_AVX2();
  for (int64_t n : {1, 2, 8, 9, 64, 300, 2049}) {
    auto a = random_vec(size_t(n), uint32_t(n), 8.f), b = a;
    softmax_ref(a.data(), n);
    softmax_avx2(b.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(b[size_t(i)], a[size_t(i)], 1e-6f * a[size_t(i)] + 1e-12f) << n;
  }
}

// The AVX-512 softmax is the AVX2 one, bit for bit (attention takes either, as the CPU has it), over
// every remainder of its 16- and 8-element steps and inputs whose exps underflow.
TEST(Softmax, Avx512IsAvx2Bitwise) {
  if (!use_avx512()) GTEST_SKIP() << "no AVX-512 here (or INFER_NO_AVX512=1)";
  for (int64_t n = 1; n <= 2100; n += n < 40 ? 1 : 97) {
    for (float range : {8.f, 200.f}) {
      auto a = random_vec(size_t(n), uint32_t(n * 3 + 1), range), b = a;
      softmax_avx2(a.data(), n);
      softmax_avx512(b.data(), n);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), size_t(n) * sizeof(float))) << n << ", range " << range;
    }
  }
}

// ---------------- kv_store, attention ----------------

// A small paged pool: n_pages pages of page_tokens rows, one layer; page table scrambled.
struct TestKv {
  int kv_dim, page_tokens, n_pages;
  std::vector<uint16_t> mem;
  std::vector<int32_t> table;
  int64_t stride() const { return int64_t(2) * page_tokens * kv_dim; }
  uint16_t* k() { return mem.data(); }
  uint16_t* v() { return mem.data() + int64_t(page_tokens) * kv_dim; }
  TestKv(int kv_dim_, int page_tokens_, int n_pages_)
      : kv_dim(kv_dim_), page_tokens(page_tokens_), n_pages(n_pages_), mem(size_t(stride() * n_pages_), 0) {
    for (int i = 0; i < n_pages; ++i) table.push_back((i * 5 + 3) % n_pages);  // n_pages coprime with 5
  }
  PagedKv view() { return PagedKv{k(), v(), stride(), page_tokens, table.data(), kv_dim}; }
};

TEST(KvStore, Avx2BitwiseEqualsReference) {
  REQUIRE_AVX2();
  TestKv a(68, 4, 3), b(68, 4, 3);
  for (int pos = 0; pos < 12; ++pos) {
    auto k = random_vec(68, uint32_t(pos), 30.f), v = random_vec(68, uint32_t(pos + 100), 1e-5f);
    kv_store_ref(k.data(), v.data(), KvType::F16, a.k(), a.v(), a.stride(), 68, 4, a.table.data(), 68, 68, pos);
    kv_store(k.data(), v.data(), KvType::F16, b.k(), b.v(), b.stride(), 68, 4, b.table.data(), 68, 68, pos);  // AVX2
  }
  EXPECT_EQ(a.mem, b.mem);
}

TEST(KvStore, WritesThroughThePageTable) {
  TestKv kv(8, 4, 3);
  std::vector<float> k(8, 1.5f), v(8, -2.f);
  kv_store_ref(k.data(), v.data(), KvType::F16, kv.k(), kv.v(), kv.stride(), 8, 4, kv.table.data(), 8, 8, 6);  // page 1, row 2
  const int64_t at = kv.table[1] * kv.stride() + 2 * 8;
  EXPECT_EQ(f16_to_f32(kv.k()[at]), 1.5f);
  EXPECT_EQ(f16_to_f32(kv.v()[at + 7]), -2.f);
  int nonzero = 0;
  for (uint16_t h : kv.mem) nonzero += h != 0;
  EXPECT_EQ(nonzero, 16);
}

// Fills keys 0..n-1 with random rows; returns the F16-rounded K and V as floats [n][kv_dim].
void fill(TestKv& kv, int n, std::vector<std::vector<float>>& ks, std::vector<std::vector<float>>& vs) {
  for (int j = 0; j < n; ++j) {
    auto k = random_vec(size_t(kv.kv_dim), uint32_t(1000 + j)), v = random_vec(size_t(kv.kv_dim), uint32_t(5000 + j));
    kv_store_ref(k.data(), v.data(), KvType::F16, kv.k(), kv.v(), kv.stride(), kv.kv_dim, kv.page_tokens, kv.table.data(),
                 kv.kv_dim, kv.kv_dim, j);
    for (float& x : k) x = f16_to_f32(f32_to_f16(x));
    for (float& x : v) x = f16_to_f32(f32_to_f16(x));
    ks.push_back(k);
    vs.push_back(v);
  }
}

TEST(Attention, ReferenceMatchesFormulaWithGqa) {
  const int n_head = 8, n_kv = 2, hd = 16, n_keys = 23;
  TestKv kv(n_kv * hd, 4, 7);
  std::vector<std::vector<float>> ks, vs;
  fill(kv, n_keys, ks, vs);
  const auto q = random_vec(size_t(n_head * hd), 77);
  std::vector<float> out(size_t(n_head * hd)), scratch(size_t(attention_rows_scratch(1, n_head / n_kv, n_keys)));
  const float scale = 1.f / std::sqrt(float(hd));
  attention_row_ref(q.data(), kv.view(), n_keys, n_head, n_kv, hd, scale, out.data(), scratch.data());
  for (int h = 0; h < n_head; ++h) {
    const int g = h / (n_head / n_kv);  // consecutive query heads share a KV head
    std::vector<double> s(static_cast<size_t>(n_keys));
    double max = -1e300, sum = 0;
    for (int j = 0; j < n_keys; ++j) {
      double dot = 0;
      for (int d = 0; d < hd; ++d) dot += double(q[size_t(h * hd + d)]) * ks[size_t(j)][size_t(g * hd + d)];
      s[size_t(j)] = dot * scale;
      max = std::max(max, s[size_t(j)]);
    }
    for (double& x : s) sum += (x = std::exp(x - max));
    for (int d = 0; d < hd; ++d) {
      double o = 0;
      for (int j = 0; j < n_keys; ++j) o += s[size_t(j)] / sum * vs[size_t(j)][size_t(g * hd + d)];
      EXPECT_NEAR(out[size_t(h * hd + d)], o, 1e-5) << "head " << h << " dim " << d;
    }
  }
}

// Pages of 16 (the engine's default), of 5 (blocks of 8 and 16 keys cross pages) and of 1.
constexpr int kTestPageSizes[] = {16, 5, 1};

TEST(Attention, Avx2MatchesReference) {
  REQUIRE_AVX2();
  struct Shape { int n_head, n_kv, hd, n_keys; };
  // outputs in registers (n_gqa · head_dim ≤ 64: 8/4, 16/3, 32/1 as bert's, 64/1) and in memory
  for (const Shape sh : {Shape{8, 4, 8, 1}, Shape{8, 4, 8, 70}, Shape{6, 2, 8, 19}, Shape{4, 1, 16, 45},
                         Shape{12, 12, 32, 128}, Shape{8, 2, 32, 33}, Shape{4, 2, 128, 300}, Shape{2, 1, 12, 17},
                         Shape{16, 16, 64, 9}}) {
    for (int page_tokens : kTestPageSizes) {
      TestKv kv(sh.n_kv * sh.hd, page_tokens, (sh.n_keys + page_tokens - 1) / page_tokens + 2);
      std::vector<std::vector<float>> ks, vs;
      fill(kv, sh.n_keys, ks, vs);
      const auto q = random_vec(size_t(sh.n_head * sh.hd), uint32_t(sh.hd));
      std::vector<float> ref(q.size()), got(q.size()), scratch(size_t(attention_rows_scratch(1, sh.n_head / sh.n_kv, sh.n_keys)));
      const float scale = 1.f / std::sqrt(float(sh.hd));
      attention_row_ref(q.data(), kv.view(), sh.n_keys, sh.n_head, sh.n_kv, sh.hd, scale, ref.data(), scratch.data());
      attention_row_avx2(q.data(), kv.view(), sh.n_keys, sh.n_head, sh.n_kv, sh.hd, scale, got.data(), scratch.data());
      for (size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(got[i], ref[i], 2e-6f) << "hd " << sh.hd << " keys " << sh.n_keys << " page " << page_tokens;
      }
    }
  }
}

// Every head_dim the AVX-512 version takes, key counts around its 16-key groups, and GQA groups that
// fill its passes of 16/(head_dim/16) heads exactly, partly, or not at all.
TEST(Attention, Avx512MatchesReference) {
  if (!use_avx512()) GTEST_SKIP() << "AVX-512 not in use here";
  struct Shape { int n_head, n_kv, hd, n_keys; };
  for (const Shape sh : {Shape{2, 1, 64, 1}, Shape{8, 2, 64, 15}, Shape{6, 1, 64, 16}, Shape{4, 2, 128, 17},
                         Shape{16, 8, 128, 70}, Shape{3, 1, 128, 300}, Shape{2, 2, 256, 33}, Shape{4, 1, 256, 9}}) {
    ASSERT_TRUE(attention_avx512_supports(sh.hd));
    for (int page_tokens : kTestPageSizes) {
      TestKv kv(sh.n_kv * sh.hd, page_tokens, (sh.n_keys + page_tokens - 1) / page_tokens + 2);
      std::vector<std::vector<float>> ks, vs;
      fill(kv, sh.n_keys, ks, vs);
      const auto q = random_vec(size_t(sh.n_head * sh.hd), uint32_t(sh.hd + sh.n_keys));
      std::vector<float> ref(q.size()), got(q.size()), scratch(size_t(attention_rows_scratch(1, sh.n_head / sh.n_kv, sh.n_keys)));
      const float scale = 1.f / std::sqrt(float(sh.hd));
      attention_row_ref(q.data(), kv.view(), sh.n_keys, sh.n_head, sh.n_kv, sh.hd, scale, ref.data(), scratch.data());
      attention_row_avx512(q.data(), kv.view(), sh.n_keys, sh.n_head, sh.n_kv, sh.hd, scale, got.data(), scratch.data());
      for (size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(got[i], ref[i], 2e-6f) << "heads " << sh.n_head << "/" << sh.n_kv << " hd " << sh.hd << " keys "
                                           << sh.n_keys << " page " << page_tokens;
      }
    }
  }
  EXPECT_FALSE(attention_avx512_supports(32));
}

// The AVX-512 version scores the heads of a GQA group two at a time (each key converted once for
// both); a lone head takes the one-head path. The two must agree to the bit, or a model's rows would
// depend on its head count's parity.
TEST(Attention, Avx512PairedHeadsEqualOneHeadAtATimeBitwise) {
  if (!use_avx512()) GTEST_SKIP() << "AVX-512 not in use here";
  for (const int hd : {64, 128, 256}) {
    for (const int n_keys : {1, 7, 8, 9, 16, 23, 70}) {
      TestKv kv(hd, 16, (n_keys + 15) / 16 + 2);
      std::vector<std::vector<float>> ks, vs;
      fill(kv, n_keys, ks, vs);
      const auto q = random_vec(size_t(2 * hd), uint32_t(hd * 100 + n_keys));
      std::vector<float> paired(q.size()), single(q.size()), scratch(size_t(attention_rows_scratch(1, 2, n_keys)));
      attention_row_avx512(q.data(), kv.view(), n_keys, 2, 1, hd, 0.125f, paired.data(), scratch.data());
      for (int h = 0; h < 2; ++h) {
        attention_row_avx512(q.data() + h * hd, kv.view(), n_keys, 1, 1, hd, 0.125f, single.data() + h * hd,
                             scratch.data());
      }
      EXPECT_EQ(0, std::memcmp(paired.data(), single.data(), paired.size() * sizeof(float)))
          << "hd " << hd << " keys " << n_keys;
    }
  }
}

TEST(Attention, HeadGroupsComputedSeparatelyEqualTheWholeRowBitwise) {
  // The forward pass splits a row's attention by KV head over threads; that must not change any bit.
  const int n_head = 8, n_kv = 4, hd = 32, n_keys = 41, n_gqa = n_head / n_kv;
  TestKv kv(n_kv * hd, 8, 7);
  std::vector<std::vector<float>> ks, vs;
  fill(kv, n_keys, ks, vs);
  const auto q = random_vec(size_t(n_head * hd), 5);
  std::vector<float> whole(q.size()), parts(q.size()), scratch(size_t(attention_rows_scratch(1, n_gqa, n_keys)));
  attention_row(q.data(), kv.view(), n_keys, n_head, n_kv, hd, 0.25f, whole.data(), scratch.data());
  for (int g = 0; g < n_kv; ++g) {
    PagedKv v = kv.view();
    v.k_base += g * hd;
    v.v_base += g * hd;
    attention_row(q.data() + g * n_gqa * hd, v, n_keys, n_gqa, 1, hd, 0.25f, parts.data() + g * n_gqa * hd,
                  scratch.data());
  }
  EXPECT_EQ(0, std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)));
}

// A block of rows (kernels::attention_rows, as a prefill or a bert sequence batches them) gives each
// row the bits of that row's attention alone: causal rows, a sliding window, whole-sequence rows, rows
// whose keys do not overlap, head widths of the register tiles' every remainder and not a multiple of 8,
// one or two vectors too wide for one register pass (their outputs summed in memory); on AVX-512, the
// three head widths of its block kernel with vectors and chunks left over by its tiles.
TEST(Attention, RowsOfABlockEqualEachRowAloneBitwise) {
  struct Shape { int n_gqa, hd; };
  struct Ranges { const char* name; int first_key[7], end[7]; int n_rows; };
  const Ranges cases[] = {
      {"causal", {0, 0, 0, 0, 0, 0, 0}, {13, 14, 15, 16, 17, 18, 19}, 7},
      {"window", {3, 4, 5, 6, 0, 0, 0}, {13, 14, 15, 16, 0, 0, 0}, 4},
      {"whole sequence", {0, 0, 0, 0, 0, 0, 0}, {37, 37, 37, 37, 37, 37, 0}, 6},
      {"apart", {0, 30, 0, 0, 0, 0, 0}, {9, 41, 0, 0, 0, 0, 0}, 2},
      {"one key", {0, 0, 0, 0, 0, 0, 0}, {1, 2, 0, 0, 0, 0, 0}, 2},
      {"long causal", {0, 0, 0, 0, 0, 0, 0}, {290, 291, 292, 293, 0, 0, 0}, 4},  // several blocks of values' keys
  };
  const Shape shapes[] = {{1, 32}, {2, 128}, {1, 64}, {4, 24}, {3, 40}, {2, 12}, {1, 8}, {4, 64}, {5, 128}, {3, 256}, {7, 64}};
  for (const Shape sh : shapes) {
    for (const Ranges& rg : cases) {
      for (int page_tokens : kTestPageSizes) {
        const int n_keys = 300, kv_dim = 2 * sh.hd;  // the second KV head's slices sit beside the first's
        TestKv kv(kv_dim, page_tokens, (n_keys + page_tokens - 1) / page_tokens + 2);
        std::vector<std::vector<float>> ks, vs;
        fill(kv, n_keys, ks, vs);
        PagedKv head = kv.view();
        head.k_base += sh.hd;
        head.v_base += sh.hd;
        const int64_t stride = int64_t(sh.n_gqa) * sh.hd + 5;  // rows need not be packed
        const auto q = random_vec(size_t(rg.n_rows * stride), uint32_t(sh.hd * 7 + sh.n_gqa));
        std::vector<float> block(q.size(), -1.f), alone(q.size(), -1.f);
        std::vector<float> scratch(size_t(attention_rows_scratch(rg.n_rows, sh.n_gqa, n_keys)));
        attention_rows(AttentionRows{q.data(), stride, block.data(), stride, rg.first_key, rg.end, rg.n_rows}, head,
                       sh.n_gqa, sh.hd, 0.3f, scratch.data());
        for (int i = 0; i < rg.n_rows; ++i) {
          PagedKv row = head;
          row.first_key = rg.first_key[i];
          attention_row(q.data() + i * stride, row, rg.end[i] - rg.first_key[i], sh.n_gqa, 1, sh.hd, 0.3f,
                        alone.data() + i * stride, scratch.data());
        }
        EXPECT_EQ(0, std::memcmp(block.data(), alone.data(), block.size() * sizeof(float)))
            << rg.name << ", " << sh.n_gqa << " heads of " << sh.hd << ", pages of " << page_tokens;
      }
    }
  }
}

}  // namespace
}  // namespace infer::kernels
