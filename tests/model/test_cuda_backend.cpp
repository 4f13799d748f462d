// The CUDA backend (src/cuda): refused with its reason where no device answers (this runs in CI); on a
// GPU, its memory plan and refusals, and bert's hidden states against the CPU's. Its logits against the
// reference files and invariant 7 are the *Cuda suites of test_fidelity.cpp and test_forward.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/block_layout.h"
#include "cuda/cuda_backend.h"
#include "kernels/quant/quant.h"
#include "forward_harness.h"
#include "model/model.h"
#include "reference_data.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

std::string error_of(const model::Model& m, const model::DeviceOptions& opts) {
  kernels::ThreadPool pool(1);
  try {
    cuda::make_backend(m, opts, pool, 16, 16, 8);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

model::DeviceOptions cuda_options() {
  model::DeviceOptions o;
  o.kind = model::DeviceKind::Cuda;
  return o;
}

TEST(CudaBackend, RefusedWithTheReasonWhereNoDeviceAnswers) {
  INFER_REQUIRE_DIR(models_dir());
  std::string why;
  if (cuda::available(&why)) GTEST_SKIP() << "a CUDA device answers here";
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(cuda::device_info().has_value());
  const auto m = model::Model::load(models_dir() + "/stories260K.gguf");
  const std::string e = error_of(*m, cuda_options());
  EXPECT_NE(e.find("device cuda is not available: " + why), std::string::npos) << e;
  // the CPU stays available
  EXPECT_EQ(error_of(*m, model::DeviceOptions{}), "");
}

TEST(CudaBackend, DescribesTheDeviceAndThePlan) {
  INFER_REQUIRE_DIR(models_dir());
  INFER_REQUIRE_CUDA();
  const auto info = cuda::device_info();
  ASSERT_TRUE(info.has_value());
  EXPECT_GT(info->total_bytes, info->free_bytes / 2);
  const auto m = model::Model::load(models_dir() + "/stories260K.gguf");
  kernels::ThreadPool pool(1);
  const auto b = cuda::make_backend(*m, cuda_options(), pool, 16, 16, 8);
  EXPECT_EQ(b->kind(), model::DeviceKind::Cuda);
  EXPECT_NE(b->description().find(info->name), std::string::npos) << b->description();
  EXPECT_NE(b->description().find("resident"), std::string::npos) << b->description();
  std::printf("[cuda] %s\n", b->description().c_str());
}

TEST(CudaBackend, AModelOverTheBudgetFailsAtLoadNamingTheNumbers) {
  INFER_REQUIRE_DIR(models_dir());
  INFER_REQUIRE_CUDA();
  const auto m = model::Model::load(models_dir() + "/stories260K.gguf");
  model::DeviceOptions o = cuda_options();
  o.vram_budget = 1 << 20;  // under the scratch alone
  const std::string e = error_of(*m, o);
  EXPECT_NE(e.find("alone need more than the 1 MiB available"), std::string::npos) << e;
  EXPECT_NE(e.find("budget 1 MiB"), std::string::npos) << e;
  o.vram_budget = 0;
  o.gpu_layers = m->hparams().n_layer + 1;  // more resident layers than the model has
  EXPECT_NE(error_of(*m, o), "");
}

// Layers streamed from host memory through slots (the rest resident) give bitwise the logits of the
// all-resident backend: the same kernels read the same bytes, from a slot instead.
class StreamingCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamingCuda, LogitsBitwiseThoseOfResidentLayers) {
  INFER_REQUIRE_DIR(reference_dir());
  INFER_REQUIRE_CUDA();
  const std::string name = GetParam();
  const auto m = model::Model::load(reference_model_path(name));
  const std::vector<int32_t> prompt = load_reference(name).at(0).prompt_ids;
  auto run = [&](int gpu_layers) {
    model::DeviceOptions o = cuda_options();
    o.gpu_layers = gpu_layers;
    ForwardHarness h(*m, 1, 1, int(prompt.size()) + 16, 512, 16, o);
    std::printf("[streaming cuda] %s gpu-layers %d: %s\n", name.c_str(), gpu_layers, h.backend().description().c_str());
    auto logits = h.feed(0, prompt);
    int32_t next = argmax(logits.back());
    for (int s = 0; s < 12; ++s) {  // decode steps: every pass streams every streamed layer again
      logits.push_back(h.feed(0, {next})[0]);
      next = argmax(logits.back());
    }
    return logits;
  };
  const auto resident = run(-1);
  for (int gpu_layers : {0, 1}) {
    expect_bitwise_equal(run(gpu_layers), resident, "gpu-layers " + std::to_string(gpu_layers));
  }
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, StreamingCuda,
                         ::testing::Values("stories260K", "tiny-llama-q4_k_m", "tiny-gemma3-q4_k_m", "tiny-qwen3moe-q4_k_m"),
                         param_name);

TEST(CudaBackend, BadRowsAreRefusedBeforeAnythingRuns) {
  INFER_REQUIRE_DIR(models_dir());
  INFER_REQUIRE_CUDA();
  const auto m = model::Model::load(models_dir() + "/stories260K.gguf");
  ForwardHarness h(*m, 1, 1, 32, 8, 16, model::DeviceKind::Cuda);
  EXPECT_THROW(h.feed(0, {m->hparams().n_vocab}), std::out_of_range);
  EXPECT_THROW(h.feed(0, std::vector<int32_t>(9, 1)), std::invalid_argument);  // over max_rows
}

// bert's final hidden states (every row, whole-sequence attention) on the GPU against the CPU's.
class BertCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(BertCuda, HiddenStatesMatchTheCpu) {
  INFER_REQUIRE_DIR(reference_dir());
  INFER_REQUIRE_CUDA();
  const std::string name = GetParam();
  const auto m = model::Model::load(reference_dir() + "/models/" + name + ".gguf");
  const int E = m->hparams().n_embd;
  std::vector<int32_t> tokens{101, 7592, 2088, 1010, 2023, 2003, 1037, 3231, 1012, 102};
  std::vector<std::vector<float>> hidden;
  for (model::DeviceKind d : {model::DeviceKind::Cpu, model::DeviceKind::Cuda}) {
    ForwardHarness h(*m, 1, 1, 32, 32, 16, d);
    model::Batch b;
    const std::vector<int32_t> table = h.page_table(0);
    b.seqs.push_back({table.data(), int(table.size())});
    for (int i = 0; i < int(tokens.size()); ++i) b.rows.push_back({0, i, tokens[size_t(i)], false, true});
    hidden.emplace_back(tokens.size() * size_t(E));
    h.backend().run(b, nullptr, hidden.back().data());
  }
  double mean = 0, var = 0, worst = 0;
  for (float v : hidden[0]) mean += v;
  mean /= double(hidden[0].size());
  for (float v : hidden[0]) var += (v - mean) * (v - mean);
  const double sigma = std::sqrt(var / double(hidden[0].size()));
  for (size_t i = 0; i < hidden[0].size(); ++i) worst = std::max(worst, std::abs(double(hidden[0][i]) - hidden[1][i]));
  const double k = name.find("q8_0") != std::string::npos ? 0.2 : 0.01;
  std::printf("[bert cuda] %s max |gpu - cpu| / sigma %.5f (bound %.2f)\n", name.c_str(), worst / sigma, k);
  EXPECT_LE(worst / sigma, k);
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, BertCuda, ::testing::Values("tiny-bert-f32", "tiny-bert-f16", "tiny-bert-q8_0"),
                         param_name);

#ifdef INFER_HAVE_CUDA
// The GPU's block layouts and the matmul's own integer arithmetic, run on the host: activations
// quantised bitwise as the CPU quantises them, and every row of every Q8_0, Q4_K, Q5_K and Q6_K matrix
// of the reference files within 1e-5 · Σ|w·x| of the CPU's reference dot product (they differ only in
// the order of the f32 scaling steps).
TEST(CudaBlockLayout, KernelArithmeticGivesTheCpuDotProducts) {
  INFER_REQUIRE_DIR(reference_dir());
  int matrices = 0;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const char* name : {"tiny-llama-q8_0", "tiny-llama-q4_k_m", "tiny-llama-q5_k_m", "tiny-llama-q6_k",
                           "tiny-gemma3-q8_0", "tiny-qwen3moe-q4_k_m"}) {
    model::LoadOptions lo;
    lo.mmap = true;  // the file's own row layout (no interleaving)
    const auto m = model::Model::load(reference_model_path(name), lo);
    std::vector<const kernels::WeightMatrix*> ws{&m->output()};
    for (const model::LayerWeights& L : m->layers()) {
      for (const kernels::WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.gate_exps,
                                             &L.up_exps, &L.down_exps}) {
        ws.push_back(w);
      }
    }
    for (const kernels::WeightMatrix* w : ws) {
      if (!w->data || !cuda::has_block_layout(w->type)) continue;
      ++matrices;
      const int64_t n = w->n_in;
      // activations: one normal row, one whose first 256 values are zero (a zero block's scale)
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = normal(rng);
      if (matrices % 2 == 0) std::fill(x.begin(), x.begin() + 256, 0.f);
      std::vector<int8_t> codes(static_cast<size_t>(n));
      std::vector<float> scales(size_t(n / 32));
      cuda::quantize_activations_as_gpu(w->type, x.data(), n, codes.data(), scales.data());
      std::vector<uint8_t> act(kernels::activation_bytes(w->type, n));
      kernels::quantize_activation_row(w->type, x.data(), act.data(), n);
      std::vector<float> xq(static_cast<size_t>(n));  // the activations the CPU's codes stand for
      kernels::dequantize_row(kernels::activation_type(w->type), act.data(), xq.data(), n);
      for (int64_t k = 0; k < n; ++k) {
        const float gpu = w->type == gguf::TensorType::Q8_0 ? scales[size_t(k / 32)] : scales[size_t(k / 256)];
        ASSERT_EQ(xq[size_t(k)], gpu * float(codes[size_t(k)])) << name << " activation " << k;
      }
      std::vector<uint8_t> gpu_row(size_t(cuda::gpu_block_row_bytes(w->type, n)));
      std::vector<float> wf(static_cast<size_t>(n));
      for (int64_t r = 0; r < w->n_out; ++r) {
        const auto* file_row = static_cast<const uint8_t*>(w->data) + r * int64_t(w->row_bytes);
        cuda::to_gpu_row(w->type, file_row, n, gpu_row.data());
        const float gpu = cuda::dot_gpu_row(w->type, gpu_row.data(), n, codes.data(), scales.data());
        const float cpu = kernels::dot_ref(w->type, file_row, act.data(), n);
        kernels::dequantize_row(w->type, file_row, wf.data(), n);
        double mag = 0;
        for (int64_t k = 0; k < n; ++k) mag += std::fabs(double(wf[size_t(k)]) * xq[size_t(k)]);
        ASSERT_LE(std::fabs(double(gpu) - cpu), 1e-5 * mag)
            << name << " " << gguf::type_name(w->type) << " row " << r << ": gpu " << gpu << " cpu " << cpu;
      }
    }
  }
  EXPECT_GE(matrices, 40);
}
#endif

}  // namespace
}  // namespace infer::test
