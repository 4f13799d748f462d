// The optimised forward pass against the scalar reference on random-weight models (model/synth.h) of
// every architecture and weight type: a mistake in binding, a kernel or the forward pass of one
// combination shows up here even where ../shared/reference has no file for it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "forward_harness.h"
#include "kernels/quant/interleave.h"
#include "model/model.h"
#include "model/synth.h"
#include "reference_forward.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

using model::Arch;
using model::SynthType;


const char* type_name(SynthType t) {
  switch (t) {
    case SynthType::F32: return "f32";
    case SynthType::F16: return "f16";
    case SynthType::BF16: return "bf16";
    case SynthType::Q8_0: return "q8_0";
    case SynthType::Q4_0: return "q4_0";
    case SynthType::Q5_0: return "q5_0";
    case SynthType::Q5_1: return "q5_1";
    case SynthType::Q4_K_M: return "q4_k_m";
    case SynthType::Q5_K_M: return "q5_k_m";
    case SynthType::Q6_K: return "q6_k";
  }
  return "?";
}

// The reference README's k per weight type: the size of llama.cpp-style activation rounding.
double tolerance_k(SynthType t) {
  switch (t) {
    case SynthType::F32:
    case SynthType::F16: return 0.01;
    case SynthType::BF16: return 0.06;
    case SynthType::Q8_0:
    case SynthType::Q4_0:
    case SynthType::Q5_0:
    case SynthType::Q5_1: return 0.2;
    default: return 0.3;
  }
}

const std::vector<int32_t> kTokens{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};

// Writes the synthetic model of `opts` and loads it with `lo` (the file is removed; the model keeps it).
std::unique_ptr<model::Model> load_synth(model::SynthOptions opts, const std::string& name,
                                         const model::LoadOptions& lo = {}) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("infer-model-synth-" + std::to_string(::getpid()) + "-" + name + ".gguf"))
                               .string();
  opts.threads = 1;
  opts.vocab_dirs = {models_dir()};
  model::write_synth(opts, path);
  auto model = model::Model::load(path, lo);
  std::filesystem::remove(path);  // the mapping (or copy) keeps the data alive
  return model;
}

// The optimised forward pass over kTokens: a prefill of 8 rows, then 4 decode steps.
std::vector<std::vector<float>> forward_logits(const model::Model& model) {
  ForwardHarness h(model, 2, 1, 32);
  auto got = h.feed(0, {kTokens.begin(), kTokens.begin() + 8});
  for (size_t i = 8; i < kTokens.size(); ++i) got.push_back(h.feed(0, {kTokens[i]})[0]);
  return got;
}

// Largest |got − want| over all rows, in units of σ of want's last row.
double max_diff_over_sigma(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want) {
  double mean = 0, var = 0;
  for (float x : want.back()) mean += x;
  mean /= double(want.back().size());
  for (float x : want.back()) var += (x - mean) * (x - mean);
  const double sigma = std::sqrt(var / double(want.back().size()));
  double worst = 0;
  for (size_t p = 0; p < want.size(); ++p) {
    for (size_t j = 0; j < want[p].size(); ++j) worst = std::max(worst, std::abs(double(got[p][j]) - want[p][j]));
  }
  return worst / sigma;
}

class Synthetic : public ::testing::TestWithParam<std::tuple<Arch, SynthType>> {};

TEST_P(Synthetic, ForwardMatchesReferenceForward) {
  const auto [arch, type] = GetParam();
  const std::string name = std::string(arch_name(arch)) + "-" + type_name(type);
  model::SynthOptions opts;
  opts.arch = arch;
  opts.type = type;
  opts.seed = 7;
  const auto model = load_synth(opts, name);
  const double d = max_diff_over_sigma(forward_logits(*model), ReferenceForward(*model).run(kTokens));
  std::printf("[synthetic] %-14s max diff/sigma %.5f (k %.2f)\n", name.c_str(), d, tolerance_k(type));
  EXPECT_LE(d, tolerance_k(type)) << name;
}

// LongRoPE (phi3 with factors trained at 256 tokens of its 1024): a per-sequence context of up to 256
// tokens picks the short factors, a longer one the long factors; either way the forward pass matches
// the reference with those factors and the attn_factor magnitude, and the two choices give logits
// further apart than the engine's error could explain.
TEST(SyntheticLongRope, ShortAndLongFactorsMatchReferenceForward) {
  for (SynthType type : {SynthType::F32, SynthType::Q8_0}) {
    model::SynthOptions opts;
    opts.arch = Arch::Phi3;
    opts.type = type;
    opts.seed = 5;
    opts.longrope_orig_ctx = 256;
    model::LoadOptions short_ctx, long_ctx;
    short_ctx.context = 256;
    long_ctx.context = 512;
    const std::string name = std::string("phi3-longrope-") + type_name(type);
    const auto s = load_synth(opts, name + "-short", short_ctx), l = load_synth(opts, name + "-long", long_ctx);
    ASSERT_FALSE(s->rope_long());
    ASSERT_TRUE(l->rope_long());
    ASSERT_GT(s->hparams().rope_mscale, 1.1f);
    const auto s_got = forward_logits(*s), l_got = forward_logits(*l);
    const double ds = max_diff_over_sigma(s_got, ReferenceForward(*s).run(kTokens));
    const double dl = max_diff_over_sigma(l_got, ReferenceForward(*l).run(kTokens));
    const double apart = max_diff_over_sigma(s_got, l_got);
    std::printf("[synthetic] %s max diff/sigma short %.5f long %.5f (k %.2f); short vs long %.3f\n", name.c_str(),
                ds, dl, tolerance_k(type), apart);
    EXPECT_LE(ds, tolerance_k(type)) << name;
    EXPECT_LE(dl, tolerance_k(type)) << name;
    EXPECT_GT(apart, 3 * std::max(ds, dl)) << name;
  }
}

// A copy (matrices rewritten into the interleaved layout where this CPU has kernels for it) and a
// mapping (row layout) of the same file give bitwise the same logits, for a prefill of 8 rows and
// decode steps, two sequences batched together.
TEST(SyntheticLayouts, CopyAndMappingGiveBitwiseEqualLogits) {
  for (SynthType type : {SynthType::Q4_K_M, SynthType::Q6_K}) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("infer-model-layout-" + std::to_string(::getpid()) + "-" + type_name(type) + ".gguf"))
                                 .string();
    model::SynthOptions opts;
    opts.arch = Arch::Qwen3;
    opts.type = type;
    opts.seed = 11;
    opts.threads = 1;
    opts.vocab_dirs = {models_dir()};
    model::write_synth(opts, path);
    model::LoadOptions mapped;
    mapped.mmap = true;
    const auto copy = model::Model::load(path), map = model::Model::load(path, mapped);
    std::filesystem::remove(path);
    EXPECT_EQ(map->interleaved_matrices(), 0);
    EXPECT_EQ(copy->interleaved_matrices() > 0, kernels::interleaved_kernels_available(kernels::TensorType::Q6_K))
        << type_name(type);
    auto run = [](const model::Model& m) {
      ForwardHarness h(m, 2, 2, 32);
      auto out = h.feed({{0, {1, 403, 407, 261, 378, 432, 383, 286}}, {1, {1, 298, 315}}});
      for (int32_t t : {376, 298, 315}) {
        for (auto& row : h.feed({{0, {t}}, {1, {t}}})) out.push_back(row);
      }
      return out;
    };
    const auto a = run(*copy), b = run(*map);
    ASSERT_EQ(a.size(), b.size());
    for (size_t r = 0; r < a.size(); ++r) {
      ASSERT_EQ(std::memcmp(a[r].data(), b[r].data(), a[r].size() * sizeof(float)), 0) << type_name(type) << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllArchsAndTypes, Synthetic,
    ::testing::Combine(::testing::Values(Arch::Llama, Arch::Qwen2, Arch::Qwen3),
                       ::testing::Values(SynthType::F32, SynthType::F16, SynthType::BF16, SynthType::Q8_0,
                                         SynthType::Q4_0, SynthType::Q5_0, SynthType::Q5_1, SynthType::Q4_K_M,
                                         SynthType::Q5_K_M, SynthType::Q6_K)),
    [](const ::testing::TestParamInfo<std::tuple<Arch, SynthType>>& info) {
      return std::string(arch_name(std::get<0>(info.param))) + "_" + type_name(std::get<1>(info.param));
    });

// gemma3 (GeGLU, sliding window) with every matrix but the LM head in Q5_0 or Q5_1, the types
// llama-quantize's K mixtures fall back to on gemma3's rows of 640 and 1152 (§9.5).
INSTANTIATE_TEST_SUITE_P(
    Gemma3Q5, Synthetic,
    ::testing::Combine(::testing::Values(Arch::Gemma3), ::testing::Values(SynthType::Q5_0, SynthType::Q5_1)),
    [](const ::testing::TestParamInfo<std::tuple<Arch, SynthType>>& info) {
      return std::string(arch_name(std::get<0>(info.param))) + "_" + type_name(std::get<1>(info.param));
    });

}  // namespace
}  // namespace infer::test
