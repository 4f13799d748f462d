// The device seam seen from the engine and the Generator on the real stories260K model: the CPU backend
// they make by default (device, description, the same tokens as before), and `cuda` refused with the
// device layer's reason, before the model is read, where this build or machine has no GPU.
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_backend.h"
#include "engine/generator.h"
#include "engine_test_util.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace infer::engine {
namespace {

using test::small_options;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Device, EngineOnTheCpuReportsItsBackend) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.kv_tokens = 1000;  // 63 pages of 16 tokens
  auto e = Engine::create(o);
  EXPECT_EQ(e->options().device.kind, model::DeviceKind::Cpu);
  EXPECT_EQ(e->stats().device, model::DeviceKind::Cpu);
  EXPECT_EQ(e->backend_description().rfind("cpu, 1 threads, KV 63 pages of 16 tokens", 0), 0u)
      << e->backend_description();
  // The scheduler's stats come from the backend's pool.
  EXPECT_EQ(e->stats().kv_pages_total, 63);
}

TEST(Device, EngineRefusesCudaWithTheReasonBeforeReadingTheModel) {
  std::string why;
  if (cuda::available(&why)) GTEST_SKIP() << "this machine has a GPU: cuda is not refused here";
  ASSERT_FALSE(why.empty());
  EngineOptions o = small_options();
  o.device.kind = model::DeviceKind::Cuda;
  o.model_path = "/nonexistent/model.gguf";  // not read: the device is checked first
  try {
    Engine::create(o);
    ADD_FAILURE() << "device cuda was accepted without a GPU";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "device cuda is not available: " + why);
  }
  REQUIRE_STORIES();
  o.model_path = test::stories_path();
  EXPECT_THROW(Engine::create(o), std::runtime_error);
  // The same options on the CPU load.
  o.device.kind = model::DeviceKind::Cpu;
  EXPECT_NO_THROW(Engine::create(o));
}

TEST(Device, EngineOptionsRefuseBadGpuLayers) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.device.gpu_layers = -2;
  try {
    Engine::create(o);
    ADD_FAILURE() << "gpu_layers -2 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "gpu_layers")) << e.what();
  }
}

class GeneratorDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_STORIES();
    model_ = model::Model::load(test::stories_path());
    tok_ = tokenizer::Tokenizer::from_gguf(model_->file());
  }
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(GeneratorDevice, CpuBackendByDefault) {
  GeneratorOptions o;
  o.context = 100;  // 7 pages of 16 tokens
  Generator g(*model_, tok_.get(), o);
  EXPECT_EQ(g.backend().kind(), model::DeviceKind::Cpu);
  EXPECT_EQ(g.backend().n_pages(), 7);
  EXPECT_EQ(g.backend().max_rows(), o.prefill_chunk);
  EXPECT_TRUE(contains(g.backend().description(), "KV 7 pages of 16 tokens")) << g.backend().description();
}

TEST_F(GeneratorDevice, RefusesCudaWithTheReason) {
  std::string why;
  if (cuda::available(&why)) GTEST_SKIP() << "this machine has a GPU: cuda is not refused here";
  GeneratorOptions o;
  o.device.kind = model::DeviceKind::Cuda;
  try {
    Generator g(*model_, tok_.get(), o);
    ADD_FAILURE() << "device cuda was accepted without a GPU";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "device cuda is not available: " + why);
  }
  o.device.kind = model::DeviceKind::Cpu;
  o.device.gpu_layers = -2;
  EXPECT_THROW(Generator(*model_, tok_.get(), o), std::invalid_argument);
}

}  // namespace
}  // namespace infer::engine
