// INFER.LOAD name path [THREADS n] [QUEUE n] [MAX-RUNNING n] [CONTEXT n] [WEIGHTS copy|mmap]
//            [DEVICE cpu|cuda] [GPU-LAYERS n|auto] [VRAM-BUDGET bytes] [KV-TYPE f16|q8_0|q4_0]
// Admin only: the caller's ACL user must be allowed MODULE LOAD. DEVICE cuda is refused at once where this build or machine has no GPU; the CPU models
// keep serving. The path must resolve (realpath) inside the model directory. The engine is created on a
// loader thread; only the calling client waits. The model is registered on the main thread when the
// load ends, also when the client disconnected meanwhile; CLIENT UNBLOCK cancels it (the load runs to
// its end, then the model is dropped instead of registered). A master sends its successful loads to
// its replicas, which load the same path from their own MODEL-DIR without blocking the link.
#include <strings.h>

#include <ctime>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "redis/admin_acl.h"
#include "redis/args.h"
#include "redis/blocked_call.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/settings.h"
#include "redis/write_queue.h"

namespace infer::redis {
namespace {

// Loader thread: creates the model's engine; returns "" or why it failed.
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
// a loader thread and registered from the event loop; a failure is logged. A model of the same name
// that the replica already has (its own MODEL line) is kept.
void load_for_master(std::shared_ptr<LoadedModel> model) {
  models().set_loading(model->name, true);
  std::thread([model] {
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
  }).detach();
}

}  // namespace

int cmd_load(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 3 || argc % 2 == 0) return rm::WrongArity(ctx);
  if (refuse_unless_module_admin(ctx, "infer.load")) return REDISMODULE_OK;
  const bool from_master = rm::GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_REPLICATED;
  std::string name = str(argv[1]);
  if (from_master && (models().find(name) || models().is_loading(name))) {
    rm::Log(ctx, "notice", "infer: the master loaded model '%s'; this replica keeps its own", name.c_str());
    return rm::ReplyWithSimpleString(ctx, "OK");
  }
  if (std::string why = check_model_name(name); !why.empty()) return reply_error(ctx, why);
  if (models().find(name)) return reply_error(ctx, "a model named '" + name + "' is already loaded");
  if (models().is_loading(name)) return reply_error(ctx, "model '" + name + "' is being loaded");

  std::string err;
  std::string path = resolve_inside(settings().model_dir, str(argv[2]), &err);
  if (path.empty()) {
    if (from_master) rm::Log(ctx, "warning", "infer: cannot load model '%s' as the master did: %s", name.c_str(), err.c_str());
    return reply_error(ctx, err);
  }

  auto model = std::make_shared<LoadedModel>();
  model->name = name;
  model->path = path;
  model->options = engine_options_for(path);
  for (int i = 3; i < argc; i += 2) {
    long long v = 0;
    if (is_word(argv[i], "THREADS")) {
      if (!parse_int(argv[i + 1], 0, 1024, "THREADS", &v, &err)) return reply_error(ctx, err);
      model->options.threads = static_cast<int>(v);
    } else if (is_word(argv[i], "QUEUE")) {
      if (!parse_int(argv[i + 1], 1, 1 << 20, "QUEUE", &v, &err)) return reply_error(ctx, err);
      model->options.queue_depth = static_cast<int>(v);
    } else if (is_word(argv[i], "MAX-RUNNING")) {
      if (!parse_int(argv[i + 1], 1, 4096, "MAX-RUNNING", &v, &err)) return reply_error(ctx, err);
      model->options.max_running = static_cast<int>(v);
    } else if (is_word(argv[i], "CONTEXT")) {
      if (!parse_int(argv[i + 1], 16, 1 << 20, "CONTEXT", &v, &err)) return reply_error(ctx, err);
      model->options.context = static_cast<int>(v);
    } else if (is_word(argv[i], "WEIGHTS")) {
      if (is_word(argv[i + 1], "mmap")) {
        model->options.mmap = true;
      } else if (is_word(argv[i + 1], "copy")) {
        model->options.mmap = false;
      } else {
        return reply_error(ctx, "WEIGHTS must be copy (huge pages, the default) or mmap (the file's page cache)");
      }
    } else if (is_word(argv[i], "DEVICE")) {
      if (is_word(argv[i + 1], "cpu")) {
        model->options.device.kind = model::DeviceKind::Cpu;
      } else if (is_word(argv[i + 1], "cuda")) {
        model->options.device.kind = model::DeviceKind::Cuda;
      } else {
        return reply_error(ctx, "DEVICE must be cpu or cuda");
      }
    } else if (is_word(argv[i], "GPU-LAYERS")) {
      if (is_word(argv[i + 1], "auto")) {
        model->options.device.gpu_layers = -1;
      } else {
        if (!parse_int(argv[i + 1], 0, 100000, "GPU-LAYERS", &v, &err)) return reply_error(ctx, err + " (or auto)");
        model->options.device.gpu_layers = static_cast<int>(v);
      }
    } else if (is_word(argv[i], "KV-TYPE")) {
      try {
        model->options.device.kv_type = model::parse_kv_type(str(argv[i + 1]));
      } catch (const std::invalid_argument&) {
        return reply_error(ctx, "KV-TYPE must be f16, q8_0 or q4_0");
      }
    } else if (is_word(argv[i], "VRAM-BUDGET")) {
      if (!parse_int(argv[i + 1], 0, 1LL << 50, "VRAM-BUDGET", &v, &err)) return reply_error(ctx, err);
      model->options.device.vram_budget = static_cast<uint64_t>(v);
    } else {
      return reply_error(ctx, "unknown option '" + str(argv[i]) +
                                  "' (THREADS, QUEUE, MAX-RUNNING, CONTEXT, WEIGHTS, DEVICE, GPU-LAYERS, VRAM-BUDGET, KV-TYPE)");
    }
  }
  // They size the GPU's share of the model: on the CPU they would be silently ignored.
  if (model->options.device.kind != model::DeviceKind::Cuda) {
    for (int i = 3; i < argc; i += 2)
      if (is_word(argv[i], "GPU-LAYERS") || is_word(argv[i], "VRAM-BUDGET"))
        return reply_error(ctx, str(argv[i]) + " applies to DEVICE cuda only");
  }
  if (model->options.device.kind == model::DeviceKind::Cuda && model->options.device.kv_type != model::KvType::F16)
    return reply_error(ctx, "KV-TYPE applies to DEVICE cpu only (cuda keeps its KV cache in f16)");
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
  try {
    std::thread([job] {
      job->error = create_engine_for(*job->model);
      complete(job);
    }).detach();
  } catch (const std::exception& e) {
    models().set_loading(name, false);
    abort_blocked(job);
    return reply_error(ctx, std::string("cannot start a loader thread: ") + e.what());
  }
  return REDISMODULE_OK;
}

}  // namespace infer::redis
