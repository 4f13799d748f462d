// INFER.LOAD name path [THREADS n] [QUEUE n] [MAX-RUNNING n] [CONTEXT n] [WEIGHTS copy|mmap]
// Admin only. The path must resolve (realpath) inside the model directory. The engine is created on a
// loader thread; only the calling client waits. The model is registered on the main thread when the
// load ends, also when the client disconnected meanwhile; CLIENT UNBLOCK cancels it (the load runs to
// its end, then the model is dropped instead of registered).
#include <strings.h>

#include <ctime>
#include <exception>
#include <memory>
#include <thread>

#include "redis/args.h"
#include "redis/blocked_call.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/settings.h"

namespace infer::redis {
namespace {

struct LoadJob : BlockedJob {
  explicit LoadJob(std::shared_ptr<LoadedModel> m) : BlockedJob("infer.load", "load"), model(std::move(m)) {}
  int reply(RedisModuleCtx* ctx) override {
    if (!error.empty()) return reply_error(ctx, "cannot load model '" + model->name + "': " + error);
    return rm::ReplyWithSimpleString(ctx, "OK");
  }
  // Registers a finished load, whether or not the client is still there (unless it was unblocked).
  void settle() override {
    models().set_loading(model->name, false);
    if (!error.empty() || unblocked) return;
    model->loaded_at_ms = static_cast<long long>(std::time(nullptr)) * 1000;
    models().add(model);
  }
  void abandon(Abandon) override {}  // a load cannot stop half way; settle() decides

  std::shared_ptr<LoadedModel> model;  // engine set on success
  std::string error;
};

}  // namespace

int cmd_load(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 3 || argc % 2 == 0) return rm::WrongArity(ctx);
  std::string name = str(argv[1]);
  if (std::string why = check_model_name(name); !why.empty()) return reply_error(ctx, why);
  if (models().find(name)) return reply_error(ctx, "a model named '" + name + "' is already loaded");
  if (models().is_loading(name)) return reply_error(ctx, "model '" + name + "' is being loaded");

  std::string err;
  std::string path = resolve_inside(settings().model_dir, str(argv[2]), &err);
  if (path.empty()) return reply_error(ctx, err);

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
    } else {
      return reply_error(ctx, "unknown option '" + str(argv[i]) + "' (THREADS, QUEUE, MAX-RUNNING, CONTEXT, WEIGHTS)");
    }
  }
  if (refuse_if_cannot_block(ctx, "INFER.LOAD")) return REDISMODULE_OK;

  models().set_loading(name, true);
  auto* job = static_cast<LoadJob*>(block_client(ctx, std::make_unique<LoadJob>(model)));
  try {
    std::thread([job] {
      try {
        job->model->engine = create_engine(job->model->options);
      } catch (const std::exception& e) {
        job->error = e.what();
      } catch (...) {
        job->error = "unknown error";
      }
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
