// Where a model's forward pass runs and where its KV pages live: the CPU (Forward over a host KvPool,
// CpuBackend) or an NVIDIA GPU (src/cuda). The serving scheduler and the Generator hold one Backend;
// page allocation, the prefix cache and admission stay device-independent: they only see page numbers.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/runtime/thread_pool.h"
#include "model/kv_pool.h"
#include "model/model.h"
#include "model/pass_profile.h"

namespace infer::model {

enum class DeviceKind { Cpu, Cuda };

// How the KV pages store keys and values (kernels/ops/kv_type.h), named here for the layers above the model.
using kernels::KvType;
using kernels::kv_type_name;
using kernels::parse_kv_type;

struct DeviceOptions {
  DeviceKind kind = DeviceKind::Cpu;
  int gpu_layers = -1;       // layers kept resident on the GPU; -1 = as many as fit (auto), the rest stream
  uint64_t vram_budget = 0;  // GPU memory to use at most, bytes; 0 = what the GPU has free
  kernels::KvType kv_type = kernels::KvType::F16;  // how the KV pages store keys and values (cuda: F16 only)
};

// "cpu" or "cuda"; throws std::invalid_argument naming the accepted values otherwise.
DeviceKind parse_device(const std::string& name);
const char* device_name(DeviceKind kind);

class Backend {
 public:
  virtual ~Backend() = default;
  // Forward::run's contract (model.h), with the KV pages on this backend's device.
  virtual void run(const Batch& batch, float* logits, float* hidden = nullptr, PassProfile* profile = nullptr) = 0;
  // Copies all layers of one page's first n_tokens rows to another page (prefix-cache partial pages).
  virtual void copy_page(int32_t from, int32_t to, int n_tokens) = 0;
  virtual int page_tokens() const = 0;
  virtual int n_pages() const = 0;
  virtual uint64_t kv_bytes() const = 0;
  virtual kernels::KvType kv_type() const { return kernels::KvType::F16; }
  virtual int max_rows() const = 0;
  virtual DeviceKind kind() const = 0;
  // qwen3moe: row `row` of the last run's routing margin in `layer` (Forward::router_margin's contract).
  virtual const RouterMargin& router_margin(int layer, int row) const = 0;
  // Weight bytes copied to the device each pass (layers streamed from host memory); 0 when resident.
  virtual uint64_t streamed_bytes_per_pass() const { return 0; }
  // One line for INFO and `infer bench`: the device, the mode and the memory plan.
  virtual std::string description() const = 0;
};

// The CPU: a Forward over a KvPool of n_pages pages of page_tokens tokens, both owned. Throws what
// KvPool and Forward throw (allocation failure, a KV type the model's rows do not fit, bad max_rows).
class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, kernels::ThreadPool& pool, int max_rows, int page_tokens, int n_pages,
             kernels::KvType kv_type = kernels::KvType::F16);
  void run(const Batch& batch, float* logits, float* hidden = nullptr, PassProfile* profile = nullptr) override;
  void copy_page(int32_t from, int32_t to, int n_tokens) override { kv_.copy_page(from, to, n_tokens); }
  int page_tokens() const override { return kv_.page_tokens(); }
  int n_pages() const override { return kv_.n_pages(); }
  uint64_t kv_bytes() const override { return kv_.bytes(); }
  kernels::KvType kv_type() const override { return kv_.type(); }
  int max_rows() const override { return forward_.max_rows(); }
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  const RouterMargin& router_margin(int layer, int row) const override { return forward_.router_margin(layer, row); }
  std::string description() const override;

  Forward& forward() { return forward_; }  // diagnostics (router margins) and tests
  KvPool& kv() { return kv_; }

 private:
  KvPool kv_;
  Forward forward_;
  int threads_;
};

}  // namespace infer::model
