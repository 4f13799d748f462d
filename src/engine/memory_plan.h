// What a model's engine will allocate, worked out before anything is allocated, and what the machine
// has left: a host refuses a load that does not fit instead of being killed for it halfway through.
// No Redis inside.
#pragma once
#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "model/hparams.h"

namespace infer::engine {

struct MemoryPlan {
  EngineOptions resolved;      // the options as Engine::create resolves them (threads, context, kv_tokens)
  uint64_t weight_bytes = 0;   // the model file (copied into huge pages, or its page cache when mapped)
  uint64_t kv_bytes = 0;       // the KV pool, allocated and touched at create
  uint64_t scratch_bytes = 0;  // forward-pass buffers, logits and hidden states of one step
  int n_pages = 0;             // KV pages of resolved.page_tokens tokens
  bool kv_on_device = false;   // device cuda: the pool is in GPU memory, which the device layer checks
  // Host memory: the KV pool counts only when it lives on the host.
  uint64_t total() const { return weight_bytes + (kv_on_device ? 0 : kv_bytes) + scratch_bytes; }
};

// Throws std::invalid_argument ("engine options: ...") for an option out of range.
void check_options(const EngineOptions& opts);

// Pure: validates `opts` and resolves them against the model's hyper-parameters exactly as
// Engine::create does. Throws std::invalid_argument for bad options or a pool under one page, and
// std::runtime_error for a pool too large to index.
MemoryPlan plan_memory(const model::HParams& hp, uint64_t file_bytes, const EngineOptions& opts);
// Same for opts.model_path, reading only its header (O(metadata), nothing copied). Throws like
// gguf::File::open and model::read_hparams for a file that is not a usable model.
MemoryPlan plan_memory(const EngineOptions& opts);

// "weights 1.0 MiB, KV pool 171.2 GiB for 4096 sequences x 65536 tokens, scratch 2.4 MiB"
std::string describe(const MemoryPlan& plan);
// Bytes for people: "512 B", "1.5 KiB", "171.2 GiB".
std::string format_bytes(uint64_t bytes);

// Memory the process can still take: MemAvailable from /proc/meminfo, or what the cgroup (v2
// memory.max, or v1 memory.limit_in_bytes) leaves above its current usage when that is smaller.
// `source` (optional) names where the figure came from. UINT64_MAX when nothing can be read.
uint64_t available_memory(std::string* source = nullptr);

// Pure: "" when `plan` fits, else why not, with the numbers. `available` is what the machine has
// (available_memory()); `cap` a configured limit on all models together (0 = none) of which
// `committed` bytes are held by models already loaded; `cap_name` names the cap in the message.
std::string check_memory(const MemoryPlan& plan, uint64_t available, uint64_t cap, uint64_t committed,
                         const std::string& cap_name = "the memory cap");

}  // namespace infer::engine
