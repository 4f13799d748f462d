// The memory plan a host checks before loading: it resolves options exactly as Engine::create does,
// and a refusal names the numbers.
#include <gtest/gtest.h>

#include "engine/memory_plan.h"
#include "engine_test_util.h"

using namespace infer::engine;
using namespace infer::engine::test;

TEST(MemoryPlan, MatchesWhatTheEngineAllocates) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  o.threads = 0;
  const MemoryPlan plan = plan_memory(o);
  auto e = Engine::create(o);
  EXPECT_EQ(plan.kv_bytes, e->stats().kv_bytes);
  EXPECT_EQ(plan.resolved.kv_tokens, e->options().kv_tokens);
  EXPECT_EQ(plan.resolved.context, e->options().context);
  EXPECT_EQ(plan.resolved.threads, e->options().threads);
  EXPECT_GE(plan.weight_bytes, e->stats().model_bytes);
  EXPECT_GT(plan.scratch_bytes, 0u);
  EXPECT_EQ(plan.total(), plan.weight_bytes + plan.kv_bytes + plan.scratch_bytes);
}

TEST(MemoryPlan, KvPoolGrowsWithSequencesAndContext) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  const MemoryPlan one = plan_memory(o);
  o.max_running *= 4;
  const MemoryPlan four = plan_memory(o);
  EXPECT_EQ(four.n_pages, one.n_pages * 4);
  EXPECT_GT(four.scratch_bytes, one.scratch_bytes);
}

TEST(MemoryPlan, RefusesBadOptionsBeforeReadingTheModel) {
  EngineOptions o = small_options();
  o.model_path = "/nonexistent.gguf";
  o.max_running = 0;
  EXPECT_THROW(plan_memory(o), std::invalid_argument);
}

TEST(MemoryPlan, RefusalNamesTheNumbers) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  const MemoryPlan plan = plan_memory(o);
  EXPECT_EQ(check_memory(plan, plan.total(), 0, 0), "");
  const std::string short_of_memory = check_memory(plan, plan.total() - 1, 0, 0);
  EXPECT_EQ(short_of_memory, "needs " + format_bytes(plan.total()) + " (" + describe(plan) + ") but only " +
                                 format_bytes(plan.total() - 1) + " is available");
  EXPECT_NE(describe(plan).find("for 8 sequences x 256 tokens"), std::string::npos) << describe(plan);
  // A cap counts the models already loaded.
  EXPECT_EQ(check_memory(plan, UINT64_MAX, 2 * plan.total(), plan.total()), "");
  const std::string capped = check_memory(plan, UINT64_MAX, 2 * plan.total() - 1, plan.total(), "infer.max-memory");
  EXPECT_NE(capped.find("but infer.max-memory is "), std::string::npos) << capped;
  EXPECT_NE(capped.find("loaded models hold " + format_bytes(plan.total())), std::string::npos) << capped;
}

// A GPU's KV pool is not host memory: the host check leaves it out (the device layer checks the GPU's).
TEST(MemoryPlan, KvPoolOnTheGpuIsNotCountedAgainstHostMemory) {
  REQUIRE_STORIES();
  EngineOptions o = small_options();
  const MemoryPlan cpu = plan_memory(o);
  EXPECT_FALSE(cpu.kv_on_device);
  o.device.kind = infer::model::DeviceKind::Cuda;
  const MemoryPlan gpu = plan_memory(o);
  EXPECT_TRUE(gpu.kv_on_device);
  EXPECT_EQ(gpu.kv_bytes, cpu.kv_bytes);
  EXPECT_EQ(gpu.total(), cpu.total() - cpu.kv_bytes);
  EXPECT_NE(describe(gpu).find(" on the GPU"), std::string::npos) << describe(gpu);
  EXPECT_EQ(describe(cpu).find(" on the GPU"), std::string::npos) << describe(cpu);
}

TEST(MemoryPlan, FormatsBytesForPeople) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(uint64_t(171) << 30), "171.0 GiB");
}

TEST(MemoryPlan, AvailableMemoryIsReadFromTheSystem) {
  std::string source;
  const uint64_t avail = available_memory(&source);
  EXPECT_GT(avail, 0u);
  EXPECT_FALSE(source.empty());
}
