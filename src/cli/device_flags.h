// The device flags of the commands that run a model (generate, bench, serve-bench):
// --device cpu|cuda [--gpu-layers N|auto] [--vram-budget BYTES].
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
};

inline void add_device_flags(CLI::App* cmd, DeviceArgs& a) {
  cmd->add_option("--device", a.device, "where the model runs: cpu (default) or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--gpu-layers", a.gpu_layers,
                  "with --device cuda: layers kept resident on the GPU (the rest stream), or auto for as many as fit");
  cmd->add_option("--vram-budget", a.vram_budget, "with --device cuda: GPU memory to use at most, in bytes (0: what is free)");
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
  if (std::string why; o.kind == model::DeviceKind::Cuda && !cuda::available(&why))
    throw std::runtime_error("device cuda is not available: " + why);
  return o;
}

}  // namespace infer::cli
