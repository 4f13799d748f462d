// INFER.LOAD name path [THREADS n] [QUEUE n] [MAX-RUNNING n] [CONTEXT n] [WEIGHTS copy|mmap]
//            [DEVICE cpu|cuda] [GPU-LAYERS n|auto] [VRAM-BUDGET bytes] [KV-TYPE f16|q8_0|q4_0]
// Admin only: the caller's ACL user must be allowed MODULE LOAD. DEVICE cuda is refused at once where this build or machine has no GPU; the CPU models
// keep serving. The path must resolve (realpath) inside the model directory. The engine is created on the
// model lane (background.h); only the calling client waits. The model is registered on the main thread when the
// load ends, also when the client disconnected meanwhile; CLIENT UNBLOCK cancels it (the load runs to
// its end, then the model is dropped instead of registered). A master sends its successful loads to
// its replicas, which load the same path from their own MODEL-DIR without blocking the link.
#include <strings.h>

#include <cctype>
#include <ctime>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "redis/admin_acl.h"
#include "redis/args.h"
#include "redis/background.h"
#include "redis/blocked_call.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/settings.h"
#include "redis/write_queue.h"

namespace infer::redis {
namespace {

const char* const kLoadsQueuedError = "too many model loads and unloads are queued; try again later";

// Model lane (background.h): creates the model's engine; returns "" or why it failed.
std::string create_engine_for(LoadedModel& model) {
  try {
    model.engine = create_engine(model.options, &model.planned_bytes);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// Main thread: puts a finished load into the registry, or logs why it failed when nobody waits for it.
void register_loaded(const std::shared_ptr<LoadedModel>& model, const std::string& error, bool log_error) {
  models().set_loading(model->name, false);
  if (!error.empty()) {
    if (log_error) rm::Log(nullptr, "warning", "infer: cannot load model '%s': %s", model->name.c_str(), error.c_str());
    return;
  }
  model->loaded_at_ms = static_cast<long long>(std::time(nullptr)) * 1000;
  models().add(model);
}

struct LoadJob : BlockedJob {
  LoadJob(std::shared_ptr<LoadedModel> m, std::vector<std::string> args)
      : BlockedJob("infer.load", "load"), model(std::move(m)), args(std::move(args)) {}
  int reply(RedisModuleCtx* ctx) override {
    if (!error.empty()) return reply_error(ctx, "cannot load model '" + model->name + "': " + error);
    return rm::ReplyWithSimpleString(ctx, "OK");
  }
  // Registers a finished load, whether or not the client is still there (unless it was unblocked),
  // and has the replicas load it too.
  void settle() override {
    if (unblocked) return models().set_loading(model->name, false);
    register_loaded(model, error, /*log_error=*/false);
    if (error.empty()) replicate_to_replicas("INFER.LOAD", std::move(args));
  }
  void abandon(Abandon) override {}  // a load cannot stop half way; settle() decides

  std::shared_ptr<LoadedModel> model;  // engine set on success
  std::vector<std::string> args;       // the command's arguments, for the replicas
  std::string error;
};

// A load replicated by this node's master: the master's link cannot block, so the model is created on
// the model lane and registered from the event loop; a failure is logged. A model of the same name
// that the replica already has (its own MODEL line) is kept.
void load_for_master(std::shared_ptr<LoadedModel> model) {
  models().set_loading(model->name, true);
  const bool queued = run_model_task([model] {
    auto done = std::make_unique<std::pair<std::shared_ptr<LoadedModel>, std::string>>(model, create_engine_for(*model));
    rm::EventLoopAddOneShot([](void* p) {
      std::unique_ptr<std::pair<std::shared_ptr<LoadedModel>, std::string>> d(
          static_cast<std::pair<std::shared_ptr<LoadedModel>, std::string>*>(p));
      try {
        register_loaded(d->first, d->second, /*log_error=*/true);
        if (d->second.empty())
          rm::Log(nullptr, "notice", "infer: loaded model '%s' as the master did", d->first->name.c_str());
      } catch (...) {
      }
    }, done.release());
  });
  if (!queued) register_loaded(model, kLoadsQueuedError, /*log_error=*/true);
}

// INFER.LOAD's options, as given: each one set overrides the module's defaults (engine_options_for).
struct LoadArgs {
  std::string name, path;  // path as given, resolved by the handler
  std::optional<int> threads, queue_depth, max_running, context;
  std::optional<bool> mmap;
  std::optional<engine::DeviceKind> device;
  std::optional<int> gpu_layers;  // -1: auto
  std::optional<uint64_t> vram_budget;
  std::optional<engine::KvType> kv_type;
};

// An option's name as the errors spell it, whatever case the client sent.
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Parses argv into *a without side effects; false with *err on a bad option or value.
bool parse(RedisModuleString** argv, int argc, LoadArgs* a, std::string* err) {
  a->name = str(argv[1]);
  a->path = str(argv[2]);
  auto int_option = [&](int i, long long lo, long long hi, std::optional<int>* out) {  // argv[i]'s value
    long long v = 0;
    if (!parse_int(argv[i + 1], lo, hi, upper(str(argv[i])), &v, err)) return false;
    *out = static_cast<int>(v);
    return true;
  };
  for (int i = 3; i < argc; i += 2) {
    if (is_word(argv[i], "THREADS")) {
      if (!int_option(i, 0, 1024, &a->threads)) return false;
    } else if (is_word(argv[i], "QUEUE")) {
      if (!int_option(i, 1, 1 << 20, &a->queue_depth)) return false;
    } else if (is_word(argv[i], "MAX-RUNNING")) {
      if (!int_option(i, 1, 4096, &a->max_running)) return false;
    } else if (is_word(argv[i], "CONTEXT")) {
      if (!int_option(i, 16, 1 << 20, &a->context)) return false;
    } else if (is_word(argv[i], "WEIGHTS")) {
      if (!is_word(argv[i + 1], "mmap") && !is_word(argv[i + 1], "copy"))
        return *err = "WEIGHTS must be copy (huge pages, the default) or mmap (the file's page cache)", false;
      a->mmap = is_word(argv[i + 1], "mmap");
    } else if (is_word(argv[i], "DEVICE")) {
      std::string device = str(argv[i + 1]);
      for (char& c : device) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      try {
        a->device = engine::parse_device(device);
      } catch (const std::invalid_argument&) {
        return *err = "DEVICE must be cpu or cuda", false;
      }
    } else if (is_word(argv[i], "GPU-LAYERS")) {
      if (is_word(argv[i + 1], "auto")) {
        a->gpu_layers = -1;
      } else if (!int_option(i, 0, 100000, &a->gpu_layers)) {
        return *err += " (or auto)", false;
      }
    } else if (is_word(argv[i], "KV-TYPE")) {
      try {
        a->kv_type = engine::parse_kv_type(str(argv[i + 1]));
      } catch (const std::invalid_argument&) {
        return *err = "KV-TYPE must be f16, q8_0 or q4_0", false;
      }
    } else if (is_word(argv[i], "VRAM-BUDGET")) {
      long long v = 0;
      if (!parse_int(argv[i + 1], 0, 1LL << 50, "VRAM-BUDGET", &v, err)) return false;
      a->vram_budget = static_cast<uint64_t>(v);
    } else {
      return *err = "unknown option '" + str(argv[i]) +
                    "' (THREADS, QUEUE, MAX-RUNNING, CONTEXT, WEIGHTS, DEVICE, GPU-LAYERS, VRAM-BUDGET, KV-TYPE)",
             false;
    }
  }
  const bool cuda = a->device == engine::DeviceKind::Cuda;
  // They size the GPU's share of the model: on the CPU they would be silently ignored.
  if (!cuda && a->gpu_layers) return *err = "GPU-LAYERS applies to DEVICE cuda only", false;
  if (!cuda && a->vram_budget) return *err = "VRAM-BUDGET applies to DEVICE cuda only", false;
  if (cuda && a->kv_type && *a->kv_type != engine::KvType::F16)
    return *err = "KV-TYPE applies to DEVICE cpu only (cuda keeps its KV cache in f16)", false;
  return true;
}

// The module's defaults for `path` with the options the command set.
engine::EngineOptions options_for(const LoadArgs& a, const std::string& path) {
  engine::EngineOptions o = engine_options_for(path);
  if (a.threads) o.threads = *a.threads;
  if (a.queue_depth) o.queue_depth = *a.queue_depth;
  if (a.max_running) o.max_running = *a.max_running;
  if (a.context) o.context = *a.context;
  if (a.mmap) o.mmap = *a.mmap;
  if (a.device) o.device.kind = *a.device;
  if (a.gpu_layers) o.device.gpu_layers = *a.gpu_layers;
  if (a.vram_budget) o.device.vram_budget = *a.vram_budget;
  if (a.kv_type) o.device.kv_type = *a.kv_type;
  return o;
}

}  // namespace

int cmd_load(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 3 || argc % 2 == 0) return rm::WrongArity(ctx);
  if (refuse_unless_module_admin(ctx, "infer.load")) return REDISMODULE_OK;
  const bool from_master = rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_REPLICATED;
  LoadArgs a;
  std::string err;
  const bool parsed = parse(argv, argc, &a, &err);
  const std::string& name = a.name;
  if (from_master && (models().find(name) || models().is_loading(name))) {
    rm::Log(ctx, "notice", "infer: the master loaded model '%s'; this replica keeps its own", name.c_str());
    return rm::ReplyWithSimpleString(ctx, "OK");
  }
  if (std::string why = check_model_name(name); !why.empty()) return reply_error(ctx, why);
  if (models().find(name)) return reply_error(ctx, "a model named '" + name + "' is already loaded");
  if (models().is_loading(name)) return reply_error(ctx, "model '" + name + "' is being loaded");

  const std::string path = resolve_inside(settings().model_dir, a.path, &err);
  if (path.empty() || !parsed) {
    if (from_master) rm::Log(ctx, "warning", "infer: cannot load model '%s' as the master did: %s", name.c_str(), err.c_str());
    return reply_error(ctx, err);
  }
  auto model = std::make_shared<LoadedModel>();
  model->name = name;
  model->path = path;
  model->options = options_for(a, path);
  if (std::string refusal = engine::device_unavailable(model->options.device); !refusal.empty()) {
    if (from_master) rm::Log(ctx, "warning", "infer: cannot load model '%s' as the master did: %s", name.c_str(), refusal.c_str());
    return reply_error(ctx, refusal);
  }
  if (from_master) {
    load_for_master(std::move(model));
    return rm::ReplyWithSimpleString(ctx, "OK");
  }
  if (refuse_if_cannot_block(ctx, "INFER.LOAD")) return REDISMODULE_OK;

  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.push_back(str(argv[i]));
  models().set_loading(name, true);
  auto* job = static_cast<LoadJob*>(block_client(ctx, std::make_unique<LoadJob>(model, std::move(args))));
  const bool queued = run_model_task([job] {
    job->error = create_engine_for(*job->model);
    complete(job);
  });
  if (!queued) {
    models().set_loading(name, false);
    abort_blocked(job);
    return reply_error(ctx, kLoadsQueuedError);
  }
  return REDISMODULE_OK;
}

}  // namespace infer::redis
