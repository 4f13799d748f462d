// The loaded models, by name. Each holds a shared engine: requests in flight keep their own reference,
// so INFER.UNLOAD only drops the registry's and the engine is destroyed when the last request is done,
// on a background thread (its destructor joins the engine threads; the main thread never waits).
// Threads: the registry is touched on the main thread only. Model objects are immutable once added.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/engine.h"

namespace infer::redis {

struct LoadedModel {
  std::string name;
  std::string path;  // as resolved when loaded
  engine::EngineOptions options;
  std::shared_ptr<engine::Engine> engine;
  uint64_t planned_bytes = 0;  // its memory plan: what infer.max-memory counts for it
  long long loaded_at_ms = 0;  // unix time
};

// Thrown by create_engine when the model's memory plan does not fit: the memory available,
// infer.max-memory, or the options (a KV pool too large to index) do not leave room for it.
class DoesNotFit : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ModelRegistry {
 public:
  std::shared_ptr<const LoadedModel> find(std::string_view name) const;
  const std::map<std::string, std::shared_ptr<const LoadedModel>, std::less<>>& all() const { return models_; }

  // Loads synchronously on the calling thread (startup). Returns an error message or ""; `did_not_fit`
  // (optional) tells whether the error is DoesNotFit's.
  std::string load_now(const std::string& name, const std::string& path, engine::KvType kv_type,
                       bool* did_not_fit = nullptr);
  void add(std::shared_ptr<const LoadedModel> m);
  bool remove(std::string_view name);
  void clear();  // a failed OnLoad: the next load of the module starts from an empty registry

  // Names with an INFER.LOAD in progress, so that two loads of one name do not race.
  bool is_loading(const std::string& name) const { return loading_.count(name) != 0; }
  void set_loading(const std::string& name, bool on);

 private:
  std::map<std::string, std::shared_ptr<const LoadedModel>, std::less<>> models_;
  std::set<std::string> loading_;
};

ModelRegistry& models();

// "" when `name` can name a model, else why not. A name becomes part of INFO lines
// (infer_model_<name>:k=v,...), so it is 1 to 128 printable ASCII characters other than ':', ',', '='
// and spaces.
std::string check_model_name(std::string_view name);

// Engine options from the current settings for `path` (main thread; also takes infer.max-memory for
// the next create_engine).
engine::EngineOptions engine_options_for(const std::string& path);

// Bytes the engines alive hold by their memory plans (weights, KV pool, scratch); any thread.
uint64_t committed_memory();

// "" when infer.max-memory may become `cap` (0: no cap), else why not: the models already loaded hold
// more, named with their bytes. Main thread.
std::string check_max_memory(long long cap);

// Creates the engine (any thread; throws std::runtime_error). First plans its memory and refuses,
// naming the numbers, with DoesNotFit when it does not fit the memory available or what
// infer.max-memory leaves after the engines alive; `planned_bytes` (optional) gets the plan's total.
// The returned pointer destroys the engine on a detached thread, so dropping the last reference never
// blocks its caller.
std::shared_ptr<engine::Engine> create_engine(const engine::EngineOptions& opts, uint64_t* planned_bytes = nullptr);

// "" when `path` holds no NUL byte, else why not, naming `what` ("model path"): the C calls that open
// files would cut the path at the NUL and open another file.
std::string check_no_nul(std::string_view what, std::string_view path);

// Resolves `path` (relative to `dir` unless absolute) with realpath and checks that it lies inside
// realpath(dir). Returns the resolved path, or "" with `err` set.
std::string resolve_inside(const std::string& dir, const std::string& path, std::string* err);

}  // namespace infer::redis
