// INFER.LOAD ... DEVICE cpu|cuda [GPU-LAYERS n|auto] [VRAM-BUDGET bytes] against a real redis-server:
// the options' errors, the device in INFER.INFO and INFO, and `cuda` refused with the device layer's
// reason where this build or machine has no GPU, while the server keeps serving its CPU models.
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_backend.h"
#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class DeviceTest : public SharedServerTest<DeviceTest> {
 public:
  static std::vector<std::string> module_args() {
    return {"MODEL", "stories", stories_model_path(), "MODEL-DIR", stories_model_dir(), "THREADS", "1"};
  }
};

TEST_F(DeviceTest, CpuModelsShowTheirDevice) {
  const std::string info = run({"INFER.INFO", "stories"});
  EXPECT_TRUE(contains(info, "device, cpu, backend, cpu, 1 threads, KV ")) << info;
  // The GPU's options would be ignored on the CPU: refused, even at their defaults.
  EXPECT_EQ(run({"INFER.LOAD", "oncpu", "stories.gguf", "DEVICE", "cpu", "GPU-LAYERS", "auto", "VRAM-BUDGET", "0"}),
            "(error) ERR GPU-LAYERS applies to DEVICE cuda only");
  ASSERT_EQ(run({"INFER.LOAD", "oncpu", "stories.gguf", "DEVICE", "cpu"}), "OK");
  EXPECT_TRUE(contains(run({"INFER.INFO", "oncpu"}), "device, cpu, backend, cpu, ")) << run({"INFER.INFO", "oncpu"});
  const std::string all = run({"INFO", "infer"});
  EXPECT_TRUE(contains(all, "infer_model_oncpu:queued=0,")) << all;
  EXPECT_TRUE(contains(all, ",device=cpu,kv_type=f16,kv_bytes_per_token=640\r\ninfer_latency_queue_ms_oncpu:")) << all;  // each model's line ends so
  EXPECT_TRUE(contains(all, "infer_model_stories:queued=0,")) << all;
  EXPECT_EQ(run({"INFER.UNLOAD", "oncpu"}), "OK");
}

TEST_F(DeviceTest, BadDeviceOptionsAreRefused) {
  EXPECT_EQ(run({"INFER.LOAD", "x", "stories.gguf", "DEVICE", "tpu"}), "(error) ERR DEVICE must be cpu or cuda");
  EXPECT_EQ(run({"INFER.LOAD", "x", "stories.gguf", "GPU-LAYERS", "-1"}),
            "(error) ERR GPU-LAYERS must be an integer in [0, 100000] (or auto)");
  EXPECT_EQ(run({"INFER.LOAD", "x", "stories.gguf", "GPU-LAYERS", "many"}),
            "(error) ERR GPU-LAYERS must be an integer in [0, 100000] (or auto)");
  EXPECT_TRUE(contains(run({"INFER.LOAD", "x", "stories.gguf", "VRAM-BUDGET", "-5"}), "ERR VRAM-BUDGET must be"));
  EXPECT_TRUE(contains(run({"INFER.LOAD", "x", "stories.gguf", "BOGUS", "1"}), "DEVICE, GPU-LAYERS, VRAM-BUDGET"));
  EXPECT_EQ(run({"INFER.MODELS"}), "[stories]");
}

TEST_F(DeviceTest, CudaWithoutAGpuIsRefusedAndTheCpuModelsKeepServing) {
  std::string why;
  if (cuda::available(&why)) GTEST_SKIP() << "this machine has a GPU: cuda is not refused here";
  const std::string refusal = "(error) ERR device cuda is not available: " + why;
  EXPECT_EQ(run({"INFER.LOAD", "gpu", "stories.gguf", "DEVICE", "cuda"}), refusal);
  EXPECT_EQ(run({"INFER.LOAD", "gpu", "stories.gguf", "DEVICE", "CUDA", "GPU-LAYERS", "4", "VRAM-BUDGET", "1000000"}),
            refusal);
  EXPECT_EQ(run({"INFER.MODELS"}), "[stories]");
  EXPECT_EQ(run({"INFER.INFO", "gpu"}), "(error) ERR unknown model 'gpu'");

  // The refused name is free, and a CPU model loaded after the refusal generates like the startup one.
  ASSERT_EQ(run({"INFER.LOAD", "gpu", "stories.gguf", "DEVICE", "cpu"}), "OK");
  const std::string text = run({"INFER.GENERATE", "gpu", "PROMPT", "Once upon a time", "MAXTOKENS", "8", "TEMP", "0"});
  EXPECT_EQ(text, ", there was a little girl");
  EXPECT_EQ(text, run({"INFER.GENERATE", "stories", "PROMPT", "Once upon a time", "MAXTOKENS", "8", "TEMP", "0"}));
  EXPECT_TRUE(contains(run({"INFER.INFO", "gpu"}), "device, cpu")) << run({"INFER.INFO", "gpu"});
  EXPECT_EQ(run({"INFER.UNLOAD", "gpu"}), "OK");
}

}  // namespace
}  // namespace infer::test
