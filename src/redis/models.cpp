#include "redis/models.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "engine/memory_plan.h"
#include "gguf/file.h"
#include "model/hparams.h"
#include "redis/background.h"
#include "redis/settings.h"
#include "redis/stats.h"

namespace infer::redis {

ModelRegistry& models() {
  static ModelRegistry r;
  return r;
}

std::shared_ptr<const LoadedModel> ModelRegistry::find(std::string_view name) const {
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

void ModelRegistry::add(std::shared_ptr<const LoadedModel> m) { models_[m->name] = std::move(m); }

bool ModelRegistry::remove(std::string_view name) {
  auto it = models_.find(name);
  if (it == models_.end()) return false;
  retire_engine(it->second->engine);
  models_.erase(it);
  return true;
}

void ModelRegistry::clear() {
  models_.clear();
  loading_.clear();
}

std::string check_model_name(std::string_view name) {
  const std::string rule = "model names are 1 to 128 printable ASCII characters other than ':', ',', '=' and spaces";
  if (name.empty() || name.size() > 128) return rule + " (got " + std::to_string(name.size()) + " bytes)";
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c <= 0x20 || c >= 0x7f || c == ':' || c == ',' || c == '=') {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", c);
      return rule + " (byte " + std::to_string(i) + " is " + code + ")";
    }
  }
  return "";
}

void ModelRegistry::set_loading(const std::string& name, bool on) {
  if (on)
    loading_.insert(name);
  else
    loading_.erase(name);
}

std::string ModelRegistry::load_now(const std::string& name, const std::string& path, engine::KvType kv_type,
                                    bool* did_not_fit) {
  if (did_not_fit) *did_not_fit = false;
  if (std::string why = check_model_name(name); !why.empty()) return why;
  if (find(name)) return "a model named '" + name + "' is already loaded";
  try {
    auto m = std::make_shared<LoadedModel>();
    m->name = name;
    m->path = path;
    m->options = engine_options_for(path);
    m->options.device.kv_type = kv_type;
    m->engine = create_engine(m->options, &m->planned_bytes);
    m->loaded_at_ms = static_cast<long long>(std::time(nullptr)) * 1000;
    add(std::move(m));
    return "";
  } catch (const DoesNotFit& e) {
    if (did_not_fit) *did_not_fit = true;
    return e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
}

namespace {

// What the engines alive hold by plan, for infer.max-memory. Loaders run on their own threads; the
// create mutex also serialises planning and allocating, so that two loads do not both count the same
// free memory.
struct MemoryLedger {
  std::mutex create_mu;
  std::mutex mu;
  uint64_t committed = 0;
  std::atomic<uint64_t> cap{0};  // infer.max-memory: written on the main thread, read by loaders
};

MemoryLedger& ledger() {
  static MemoryLedger l;
  return l;
}

}  // namespace

engine::EngineOptions engine_options_for(const std::string& path) {
  const Settings& s = settings();
  engine::EngineOptions o;
  o.model_path = path;
  o.threads = static_cast<int>(s.threads);
  o.nice = thread_nice();
  o.max_running = static_cast<int>(s.max_running);
  o.queue_depth = static_cast<int>(s.queue_depth);
  o.context = static_cast<int>(s.context);
  ledger().cap = static_cast<uint64_t>(s.max_memory);  // the cap in force when the load was asked for
  return o;
}

uint64_t committed_memory() {
  std::lock_guard lk(ledger().mu);
  return ledger().committed;
}

std::string check_max_memory(long long cap) {
  const uint64_t held = committed_memory();
  if (cap == 0 || static_cast<uint64_t>(cap) >= held) return "";
  std::string who;
  uint64_t named = 0;
  for (const auto& [name, m] : models().all()) {
    who += (who.empty() ? "" : ", ") + name + " " + engine::format_bytes(m->planned_bytes);
    named += m->planned_bytes;
  }
  if (held > named) who += std::string(who.empty() ? "" : ", ") + "unloaded models still finishing requests " +
                           engine::format_bytes(held - named);
  return "infer.max-memory " + std::to_string(cap) + " is below the " + std::to_string(held) +
         " bytes the loaded models hold (" + who + "): unload models first";
}

std::shared_ptr<engine::Engine> create_engine(const engine::EngineOptions& opts, uint64_t* planned_bytes) {
  MemoryLedger& l = ledger();
  std::lock_guard create_lk(l.create_mu);
  // Plan before allocating: a load that does not fit is refused, never OOM-killed halfway through. A
  // file that is not a usable model throws as itself; a plan that cannot be made or does not fit, as
  // DoesNotFit.
  const std::unique_ptr<gguf::File> header = gguf::File::open(opts.model_path);
  const model::HParams hp = model::read_hparams(*header);
  engine::MemoryPlan plan;
  try {
    plan = engine::plan_memory(hp, header->file_size(), opts);
  } catch (const std::exception& e) {
    throw DoesNotFit(e.what());
  }
  const std::string refusal = engine::check_memory(plan, engine::available_memory(), l.cap.load(),
                                                   committed_memory(), "infer.max-memory");
  if (!refusal.empty()) throw DoesNotFit(refusal);
  std::unique_ptr<engine::Engine> e = engine::Engine::create(opts);
  if (!e) throw std::runtime_error("engine could not be created for " + opts.model_path);
  const uint64_t held = plan.total();
  if (planned_bytes) *planned_bytes = held;
  {
    std::lock_guard lk(l.mu);
    l.committed += held;
  }
  return std::shared_ptr<engine::Engine>(e.release(), [held](engine::Engine* p) {
    engine_destroyed(p);
    // The destructor cancels and joins the engine's threads: never on the caller's (main) thread,
    // unless the model lane's queue is full.
    auto free_engine = [p, held] {
      delete p;
      std::lock_guard lk(ledger().mu);
      ledger().committed -= held;
    };
    if (!run_model_task(free_engine)) free_engine();
  });
}

namespace {

// True when `path` names `dir` itself or something below it (both absolute and normalised).
bool is_inside(const std::filesystem::path& dir, const std::filesystem::path& path) {
  return std::mismatch(dir.begin(), dir.end(), path.begin(), path.end()).first == dir.end();
}

}  // namespace

std::string check_no_nul(std::string_view what, std::string_view path) {
  const size_t at = path.find('\0');
  if (at == std::string_view::npos) return "";
  return std::string(what) + " '" + std::string(path.substr(0, at)) + "...' holds a NUL byte (byte " +
         std::to_string(at) + "): paths cannot contain NUL";
}

std::string resolve_inside(const std::string& dir, const std::string& path, std::string* err) {
  namespace fs = std::filesystem;
  if (dir.empty()) {
    *err = "INFER.LOAD is disabled: no model directory configured (MODEL-DIR / infer.model-dir)";
    return "";
  }
  if (std::string why = check_no_nul("model path", path); !why.empty()) {
    *err = why;
    return "";
  }
  char dir_real[PATH_MAX];
  if (!realpath(dir.c_str(), dir_real)) {
    *err = "model directory '" + dir + "' does not exist";
    return "";
  }
  const fs::path base = fs::path(dir_real);
  const std::string outside = "model path '" + path + "' resolves outside the model directory";
  // Lexical check first, so that '../x' is refused as outside whether or not x exists.
  const fs::path joined = (base / path).lexically_normal();
  if (!is_inside(base, joined)) {
    *err = outside;
    return "";
  }
  // Then the real path, so that a symlink inside the directory cannot point out of it.
  char file_real[PATH_MAX];
  if (!realpath(joined.c_str(), file_real)) {
    *err = "model file '" + path + "' not found in the model directory";
    return "";
  }
  if (!is_inside(base, fs::path(file_real))) {
    *err = outside;
    return "";
  }
  // Opening a FIFO blocks until a writer comes (the name would stay "being loaded" forever).
  struct stat st {};
  if (::stat(file_real, &st) != 0 || !S_ISREG(st.st_mode)) {
    *err = "model path '" + path + "' is not a regular file";
    return "";
  }
  return file_real;
}

}  // namespace infer::redis
