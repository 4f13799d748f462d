// The device flags of the commands that run a model (generate, bench, serve-bench):
// --device cpu|cuda [--gpu-layers N|auto] [--vram-budget BYTES] [--kv-type f16|q8_0|q4_0].
#pragma once
#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

#include "cuda/cuda_backend.h"
#include "model/backend.h"

namespace infer::cli {

struct DeviceArgs {
  std::string device = "cpu";
  std::string gpu_layers = "auto";
  uint64_t vram_budget = 0;
  std::string kv_type = "f16";
};

inline constexpr const char* kKvTypeHelp =
    "how the KV cache stores keys and values: f16 (default), q8_0 (about half the bytes) or q4_0 (about a "
    "quarter; less exact), GGUF's blocks of 32 (the model's KV rows must be a multiple of 32 wide); cpu only";

inline void add_device_flags(CLI::App* cmd, DeviceArgs& a) {
  cmd->add_option("--device", a.device, "where the model runs: cpu (default) or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--gpu-layers", a.gpu_layers,
                  "with --device cuda: layers kept resident on the GPU (the rest stream), or auto for as many as fit");
  cmd->add_option("--vram-budget", a.vram_budget, "with --device cuda: GPU memory to use at most, in bytes (0: what is free)");
  cmd->add_option("--kv-type", a.kv_type, kKvTypeHelp)->check(CLI::IsMember({"f16", "q8_0", "q4_0"}));
}

// The options the flags ask for. Throws std::invalid_argument for a bad --gpu-layers, and
// std::runtime_error ("device cuda is not available: <why>") for cuda where this build or machine has
// none, so that the command fails before it reads the model.
inline model::DeviceOptions device_options(const DeviceArgs& a) {
  model::DeviceOptions o;
  o.kind = model::parse_device(a.device);
  if (a.gpu_layers != "auto") {
    size_t used = 0;
    long v = -1;
    try {
      v = std::stol(a.gpu_layers, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != a.gpu_layers.size() || v < 0 || v > 100000)
      throw std::invalid_argument("--gpu-layers: expected a layer count >= 0 or 'auto', got '" + a.gpu_layers + "'");
    o.gpu_layers = int(v);
  }
  o.vram_budget = a.vram_budget;
  o.kv_type = kernels::parse_kv_type(a.kv_type);
  if (o.kind == model::DeviceKind::Cuda && o.kv_type != kernels::KvType::F16)
    throw std::invalid_argument("--kv-type " + a.kv_type + ": device cuda keeps its KV cache in f16");
  if (std::string why; o.kind == model::DeviceKind::Cuda && !cuda::available(&why))
    throw std::runtime_error("device cuda is not available: " + why);
  return o;
}

}  // namespace infer::cli
