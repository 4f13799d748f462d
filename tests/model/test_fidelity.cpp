// Acceptance test of the engine against the reference outputs (../shared/reference/README.md):
// teacher-forced logits within k·σ at every prompt position and generation step for every model, and
// stories260K's free-running greedy continuation equal to the reference's; on the CPU, and on the GPU
// (the *Cuda suites, skipped where no CUDA device answers). The FidelityKv* suites run the CPU with a
// quantised KV cache: Q8_0 within every file's bound, Q4_0 measured (docs/performance.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

#include "cuda/cuda_backend.h"
#include "forward_harness.h"
#include "model/model.h"
#include "reference_data.h"
#include "support/data_dirs.h"
#include "tokenizer/tokenizer.h"

namespace infer::test {
namespace {

// Largest |ours - reference| / σ over the listed ids of one top-N list.
double max_scaled_diff(const std::vector<float>& ours, const TopLogits& ref, double sigma) {
  double worst = 0;
  for (const auto& [id, logit] : ref) worst = std::max(worst, std::abs(double(ours.at(size_t(id))) - logit) / sigma);
  return worst;
}

double max_scaled_diff(const std::vector<float>& ours, const std::vector<float>& ref, double sigma) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(double(ours.at(i)) - ref[i]) / sigma);
  return worst;
}

// Mixture-of-experts files (spec architectures-more.md §3.4): where the router's least likely chosen
// expert and most likely other one nearly tie, a difference in rounding (our F16 KV cache against the
// reference's F32 one, activation quantisation meeting a rounding boundary) may choose the other
// expert and move that row's logits by about 1σ. Such a miss is reported with the tie instead of
// failing or loosening k when the row itself has a margin under kRowNearTie in some layer, or when an
// earlier row of the sequence had one under kKvNearTie in a layer whose keys and values later layers
// read. Every other miss fails. (The misses of the three tiny-qwen3moe files lie on such rows.)
// The GPU keeps activations in F32 where the reference rounds them to 8 bits, so its router
// probabilities sit farther from the reference's and its near-ties are twice as wide.
constexpr float kRowNearTie = 5e-3f;
constexpr float kKvNearTie = 1e-3f;
constexpr float kRowNearTieUnrounded = 1e-2f;
constexpr float kKvNearTieUnrounded = 2e-3f;

// The narrowest routing margin of batch row `row` over the layers up to `last_layer`, as text, or ""
// when none is under `below`.
std::string near_tie(const model::Backend& f, const model::HParams& hp, int row, int last_layer, float below) {
  if (!hp.is_moe()) return "";
  std::string found;
  float narrowest = below;
  for (int l = 0; l <= last_layer; ++l) {
    const model::RouterMargin& m = f.router_margin(l, row);
    if (m.last_chosen - m.first_unchosen >= narrowest) continue;
    narrowest = m.last_chosen - m.first_unchosen;
    char text[128];
    std::snprintf(text, sizeof text, "layer %d router p %.6f (chosen) vs %.6f (not chosen)", l, m.last_chosen,
                  m.first_unchosen);
    found = text;
  }
  return found;
}

// Prints the largest diff/σ outside near-ties. Asserts the larger of `k_bound` and the file's k.
void check_teacher_forced(const std::string& name, const model::DeviceOptions& options, double k_bound = 0) {
  const model::DeviceKind device = options.kind;
  const auto model = model::Model::load(reference_model_path(name));
  const auto records = load_reference(name);
  const auto tok = tokenizer::Tokenizer::from_gguf(model->file());
  const double k = std::max(k_bound, tolerance_factor(name));
  // A quantised KV cache moves router probabilities about as far as the GPU's unrounded activations.
  const bool cpu = device == model::DeviceKind::Cpu && options.kv_type == kernels::KvType::F16;
  const float row_near = cpu ? kRowNearTie : kRowNearTieUnrounded, kv_near = cpu ? kKvNearTie : kKvNearTieUnrounded;
  double worst_model = 0;
  int rows_model = 0, explained_model = 0;  // rows compared; misses explained by a router near-tie

  for (const ReferenceRecord& rec : records) {
    SCOPED_TRACE("prompt: " + rec.prompt.substr(0, 40));
    // Our tokenizer must give the reference's ids (BOS per the vocab, special tokens not parsed).
    tokenizer::EncodeOptions plain;
    plain.parse_special = false;
    EXPECT_EQ(tok->encode(rec.prompt, plain), rec.prompt_ids);
    const int n_prompt = int(rec.prompt_ids.size());
    const int n_steps = int(rec.steps_top.size());
    ForwardHarness h(*model, 1, 1, n_prompt + n_steps + 1, 512, 16, options);
    const double sigma = rec.sigma();
    double worst = 0;

    int explained = 0, rows = 0;  // misses reported at near-ties; rows compared
    std::string kv_tie;  // the first near-tie whose keys and values later rows read
    // A miss on a row with a routing near-tie, or after one in the keys and values, is reported, not failed.
    auto check = [&](double d, const std::string& what, int row) {
      const std::string row_tie = near_tie(h.backend(), model->hparams(), row, model->hparams().n_layer - 1, row_near);
      if (d <= k || (row_tie.empty() && kv_tie.empty())) {
        EXPECT_LE(d, k) << what << (model->hparams().is_moe() ? "; narrowest routing margin of the row: " +
                                                                     near_tie(h.backend(), model->hparams(), row,
                                                                              model->hparams().n_layer - 1, 1.f)
                                                               : "");
        worst = std::max(worst, d);
      } else if (++explained <= 3) {  // the first few show what happened
        std::printf("[fidelity] %s: %s misses by %.3f sigma at a router near-tie: %s\n", name.c_str(), what.c_str(), d,
                    (row_tie.empty() ? kv_tie : "this row, " + row_tie).c_str());
      }
      ++rows;
      if (kv_tie.empty()) {
        const std::string t = near_tie(h.backend(), model->hparams(), row, model->hparams().n_layer - 2, kv_near);
        if (!t.empty()) kv_tie = what + ", " + t;
      }
    };

    // All prompt rows in one batch, as the reference computed them.
    const auto prompt_logits = h.feed(0, rec.prompt_ids);
    ASSERT_EQ(int(rec.prompt_top.size()), n_prompt);
    for (int i = 0; i < n_prompt; ++i) {
      check(max_scaled_diff(prompt_logits[size_t(i)], rec.prompt_top[size_t(i)], sigma),
            "prompt position " + std::to_string(i), i);
    }
    // Generation steps, teacher-forced with the reference's greedy ids.
    std::vector<float> step_logits = prompt_logits.back();
    for (int s = 0; s < n_steps; ++s) {
      if (s > 0) step_logits = h.feed(0, {rec.greedy_ids.at(size_t(s - 1))})[0];
      double d = max_scaled_diff(step_logits, rec.steps_top[size_t(s)], sigma);
      if (s < int(rec.steps_full.size())) d = std::max(d, max_scaled_diff(step_logits, rec.steps_full[size_t(s)], sigma));
      check(d, "generation step " + std::to_string(s), s == 0 ? n_prompt - 1 : 0);
    }
    rows_model += rows;
    explained_model += explained;
    if (explained > 3) std::printf("[fidelity] %s: %d more misses at router near-ties\n", name.c_str(), explained - 3);
    worst_model = std::max(worst_model, worst);
  }
  std::printf("[fidelity%s%s%s] %-20s max diff/sigma %.5f (tolerance k = %.2f, margin %.1fx)\n",
              device == model::DeviceKind::Cpu ? "" : " cuda", options.kv_type == kernels::KvType::F16 ? "" : " kv ",
              options.kv_type == kernels::KvType::F16 ? "" : kernels::kv_type_name(options.kv_type), name.c_str(),
              worst_model, k, k / std::max(worst_model, 1e-12));
  if (explained_model > 0) {
    std::printf("[fidelity] %-20s %d of %d rows miss at or after a router near-tie\n", name.c_str(), explained_model,
                rows_model);
  }
  // near-ties explain a few rows, never most of them
  EXPECT_LE(explained_model * 5, rows_model) << explained_model << " of " << rows_model << " rows at near-ties";
  ::testing::Test::RecordProperty("max_diff_over_sigma", std::to_string(worst_model));
}

model::DeviceOptions on(model::DeviceKind kind, kernels::KvType kv_type = kernels::KvType::F16) {
  model::DeviceOptions o;
  o.kind = kind;
  o.kv_type = kv_type;
  return o;
}

class Fidelity : public ::testing::TestWithParam<std::string> {};

TEST_P(Fidelity, TeacherForcedLogitsWithinTolerance) {
  INFER_REQUIRE_DIR(reference_dir());
  check_teacher_forced(GetParam(), on(model::DeviceKind::Cpu));
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, Fidelity, ::testing::ValuesIn(reference_model_names()), param_name);

// A Q8_0 KV cache keeps every quantised file within its own bound. The float files' k (0.01, bf16
// 0.06) is below what rounding keys and values to 8 bits itself moves the logits (0.03-0.06σ
// measured; stories260K 0.18σ, its 8-wide heads sharing a block's scale four at a time): they are
// held to kQ8KvBound, the bound the reference gives llama.cpp's own 8-bit rounding of activations.
constexpr double kQ8KvBound = 0.2;
class FidelityKvQ8_0 : public ::testing::TestWithParam<std::string> {};

TEST_P(FidelityKvQ8_0, TeacherForcedLogitsWithinTolerance) {
  INFER_REQUIRE_DIR(reference_dir());
  check_teacher_forced(GetParam(), on(model::DeviceKind::Cpu, kernels::KvType::Q8_0), kQ8KvBound);
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, FidelityKvQ8_0, ::testing::ValuesIn(reference_model_names()), param_name);

// Q4_0 is measured (the printed diff/σ, docs/redis.md) and held only to kQ4KvBound: 4-bit keys
// and values move the logits by 0.5-1.6σ (stories260K 3.1σ); the kernel tests check the reading.
constexpr double kQ4KvBound = 4.0;
class FidelityKvQ4_0 : public ::testing::TestWithParam<std::string> {};

TEST_P(FidelityKvQ4_0, TeacherForcedLogitsMeasured) {
  INFER_REQUIRE_DIR(reference_dir());
  check_teacher_forced(GetParam(), on(model::DeviceKind::Cpu, kernels::KvType::Q4_0), kQ4KvBound);
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, FidelityKvQ4_0, ::testing::ValuesIn(reference_model_names()), param_name);

class FidelityCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(FidelityCuda, TeacherForcedLogitsWithinTolerance) {
  INFER_REQUIRE_DIR(reference_dir());
  INFER_REQUIRE_CUDA();
  check_teacher_forced(GetParam(), on(model::DeviceKind::Cuda));
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, FidelityCuda, ::testing::ValuesIn(reference_model_names()), param_name);

void check_stories_greedy(model::DeviceKind device) {
  const auto model = model::Model::load(reference_model_path("stories260K"));
  for (const ReferenceRecord& rec : load_reference("stories260K")) {
    SCOPED_TRACE("prompt: " + rec.prompt.substr(0, 40));
    const double tol = tolerance_factor("stories260K") * rec.sigma();
    const int n_steps = int(rec.greedy_ids.size());
    ForwardHarness h(*model, 1, 1, int(rec.prompt_ids.size()) + n_steps + 1, 512, 16, device);
    std::vector<float> logits = h.feed(0, rec.prompt_ids).back();
    int matched = 0;
    for (int s = 0; s < n_steps; ++s, matched = s) {
      const int32_t ours = argmax(logits);
      const auto& top = rec.steps_top.at(size_t(s));
      if (ours != rec.greedy_ids[size_t(s)]) {
        // After a near-tie in the reference a correct engine may take the other token (README).
        ASSERT_LT(top[0].second - top[1].second, tol) << "greedy step " << s << ": ours " << ours << ", reference "
                                                      << rec.greedy_ids[size_t(s)];
        break;
      }
      if (s + 1 < n_steps) logits = h.feed(0, {ours})[0];
    }
    std::string shown = rec.prompt.substr(0, 24);
    std::replace(shown.begin(), shown.end(), '\n', ' ');
    std::printf("[greedy%s] stories260K \"%s\": %d/%d tokens equal to the reference\n",
                device == model::DeviceKind::Cpu ? "" : " cuda", shown.c_str(), matched, n_steps);
  }
}

TEST(FidelityStories260K, GreedyMatchesReference) {
  INFER_REQUIRE_DIR(reference_dir());
  check_stories_greedy(model::DeviceKind::Cpu);
}

TEST(FidelityStories260KCuda, GreedyMatchesReference) {
  INFER_REQUIRE_DIR(reference_dir());
  INFER_REQUIRE_CUDA();
  check_stories_greedy(model::DeviceKind::Cuda);
}

}  // namespace
}  // namespace infer::test
