// plan_memory: the engine's allocations from its options and the model's header; available_memory:
// /proc/meminfo and the cgroup's limit.
#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <thread>

#include "gguf/file.h"
#include "model/kv_pool.h"
#include "model/model.h"

namespace infer::engine {
void check_options(const EngineOptions& o) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("engine options: " + what); };
  if (o.threads < 0) bad("threads must be >= 0");
  if (o.max_running < 1) bad("max_running must be >= 1");
  if (o.queue_depth < 1) bad("queue_depth must be >= 1");
  if (o.context < 2) bad("context must be >= 2");
  if (o.kv_tokens < 0) bad("kv_tokens must be >= 0");
  if (o.page_tokens < 1) bad("page_tokens must be >= 1");
  if (o.step_tokens < 1) bad("step_tokens must be >= 1");
  if (o.nice < 0 || o.nice > 19) bad("nice must be in 0..19");
  if (o.device.gpu_layers < -1) bad("gpu_layers must be >= 0, or -1 for as many as fit");
}

namespace {

// A number from a one-value file such as memory.max; nullopt for "max", absent or unreadable.
bool read_number(const std::string& path, uint64_t* out) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word.empty() || word.find_first_not_of("0123456789") != std::string::npos) return false;
  try {
    *out = std::stoull(word);
    return true;
  } catch (...) {
    return false;
  }
}

// What the tightest limit among the process's cgroup and its ancestors leaves (v2), or the v1 memory
// controller's. UINT64_MAX when there is no limit.
uint64_t cgroup_room() {
  uint64_t room = std::numeric_limits<uint64_t>::max();
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    std::string rel = line.substr(3);
    for (;;) {
      const std::string dir = "/sys/fs/cgroup" + (rel == "/" ? std::string() : rel);
      uint64_t max = 0, current = 0;
      if (read_number(dir + "/memory.max", &max) && read_number(dir + "/memory.current", &current))
        room = std::min(room, max > current ? max - current : 0);
      if (rel.empty() || rel == "/") break;
      const size_t slash = rel.rfind('/');
      rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
    }
  }
  uint64_t limit = 0, usage = 0;
  // v1 reports "no limit" as a huge number, which the min leaves alone.
  if (read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", &limit) &&
      read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", &usage))
    room = std::min(room, limit > usage ? limit - usage : 0);
  return room;
}

}  // namespace

MemoryPlan plan_memory(const model::HParams& hp, uint64_t file_bytes, const EngineOptions& opts) {
  check_options(opts);
  MemoryPlan p;
  EngineOptions& o = p.resolved;
  o = opts;
  if (o.threads == 0) o.threads = int(std::max(1u, std::thread::hardware_concurrency()));
  if (hp.n_ctx_train > 0) o.context = std::min(o.context, hp.n_ctx_train);
  // By default max_running sequences of the full context fit at once: each rounded up to whole pages.
  const int64_t context_pages = (int64_t(o.context) + o.page_tokens - 1) / o.page_tokens;
  int64_t kv_tokens = int64_t(o.max_running) * context_pages * o.page_tokens;
  if (opts.kv_tokens > 0)
    kv_tokens = opts.kv_tokens;
  else if (opts.kv_bytes > 0)  // whole pages within the budget (a page is its tokens plus a small pad)
    kv_tokens = int64_t(std::min<uint64_t>(opts.kv_bytes / model::KvPool::bytes_for(hp, o.page_tokens, 1, o.device.kv_type),
                                           INT32_MAX / o.page_tokens)) * o.page_tokens;
  if (kv_tokens < o.page_tokens)
    throw std::invalid_argument("engine options: the KV pool holds less than one page (" + std::to_string(kv_tokens) +
                                " tokens at " + std::to_string(model::KvPool::bytes_per_token(hp, o.device.kv_type)) +
                                " bytes/token)");
  const int64_t n_pages = (kv_tokens + o.page_tokens - 1) / o.page_tokens;
  if (n_pages > INT32_MAX / o.page_tokens)
    throw std::runtime_error("engine: KV pool of " + std::to_string(kv_tokens) + " tokens is too large");
  o.kv_tokens = int(n_pages * o.page_tokens);
  p.n_pages = int(n_pages);
  p.kv_bytes = model::KvPool::bytes_for(hp, o.page_tokens, p.n_pages, o.device.kv_type);
  p.kv_on_device = o.device.kind != model::DeviceKind::Cpu;
  p.weight_bytes = file_bytes;
  // A step has at most step_tokens + max_running rows (scheduler.cpp); logits for max_running rows and
  // hidden states for every row.
  const int max_rows = o.step_tokens + o.max_running;
  p.scratch_bytes = model::Forward::scratch_bytes(hp, max_rows, o.threads) +
                    (uint64_t(o.max_running) * uint64_t(hp.n_vocab) + uint64_t(max_rows) * uint64_t(hp.n_embd)) *
                        sizeof(float);
  return p;
}

MemoryPlan plan_memory(const EngineOptions& opts) {
  check_options(opts);  // before the file is read
  auto file = gguf::File::open(opts.model_path);
  return plan_memory(model::read_hparams(*file), file->file_size(), opts);
}

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = double(bytes) / 1024;
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string describe(const MemoryPlan& p) {
  const EngineOptions& o = p.resolved;
  std::string pool = "KV pool " + format_bytes(p.kv_bytes);
  // The pool is max_running full contexts unless its size was given directly.
  if (o.kv_tokens == int64_t(o.max_running) * ((int64_t(o.context) + o.page_tokens - 1) / o.page_tokens) * o.page_tokens)
    pool += " for " + std::to_string(o.max_running) + " sequences x " + std::to_string(o.context) + " tokens";
  else
    pool += " for " + std::to_string(o.kv_tokens) + " tokens";
  if (o.device.kv_type != kernels::KvType::F16) pool += std::string(" as ") + kernels::kv_type_name(o.device.kv_type);
  if (p.kv_on_device) pool += " on the GPU";
  return "weights " + format_bytes(p.weight_bytes) + ", " + pool + ", scratch " + format_bytes(p.scratch_bytes);
}

uint64_t available_memory(std::string* source) {
  uint64_t avail = std::numeric_limits<uint64_t>::max();
  std::string from = "nothing readable";
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) {
      avail = uint64_t(kib) * 1024;
      from = "MemAvailable";
      break;
    }
  }
  if (const uint64_t room = cgroup_room(); room < avail) {
    avail = room;
    from = "the cgroup's memory limit";
  }
  if (source) *source = from;
  return avail;
}

std::string check_memory(const MemoryPlan& plan, uint64_t available, uint64_t cap, uint64_t committed,
                         const std::string& cap_name) {
  const uint64_t need = plan.total();
  const std::string needs = "needs " + format_bytes(need) + " (" + describe(plan) + ")";
  if (cap > 0 && (committed >= cap || need > cap - committed))
    return needs + " but " + cap_name + " is " + format_bytes(cap) + " and loaded models hold " +
           format_bytes(committed) + ", leaving " + format_bytes(committed >= cap ? 0 : cap - committed);
  if (need > available) return needs + " but only " + format_bytes(available) + " is available";
  return "";
}

}  // namespace infer::engine
