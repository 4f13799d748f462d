// INFER.LOAD name path [THREADS n] [QUEUE n] [MAX-RUNNING n] [CONTEXT n] [WEIGHTS copy|mmap]
// Admin only. The path must resolve (realpath) inside the model directory. The engine is created on a
// background thread; only the calling client waits. The model is registered on the main thread, in the
// reply callback, or in the free callback when the client went away meanwhile.
#include <strings.h>

#include <ctime>
#include <exception>
#include <memory>
#include <thread>

#include "redis/args.h"
#include "redis/commands.h"
#include "redis/models.h"
#include "redis/settings.h"
#include "redis/stats.h"

namespace infer::redis {
namespace {

struct LoadJob {
  std::shared_ptr<LoadedModel> model;  // engine set on success
  std::string error;
  bool registered = false;
};

// Main thread: puts a finished load into the registry (once).
void finish(LoadJob* job) {
  if (job->registered) return;
  job->registered = true;
  models().set_loading(job->model->name, false);
  if (job->error.empty()) {
    job->model->loaded_at_ms = static_cast<long long>(std::time(nullptr)) * 1000;
    models().add(job->model);
  }
}

int load_reply(RedisModuleCtx* ctx, RedisModuleString**, int) {
  try {
    MainThreadTimer timer("infer.load reply");
    auto* job = static_cast<LoadJob*>(rm::GetBlockedClientPrivateData(ctx));
    finish(job);
    if (!job->error.empty()) return reply_error(ctx, "cannot load model '" + job->model->name + "': " + job->error);
    return rm::ReplyWithSimpleString(ctx, "OK");
  } catch (...) {
    return rm::ReplyWithError(ctx, "ERR internal error while registering the model");
  }
}

void load_free(RedisModuleCtx*, void* privdata) {
  auto* job = static_cast<LoadJob*>(privdata);
  try {
    finish(job);  // the client may have disconnected: the model still gets registered
  } catch (...) {
  }
  delete job;
}

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

  auto* job = new LoadJob{model, "", false};
  RedisModuleBlockedClient* bc = rm::BlockClient(ctx, load_reply, nullptr, load_free, 0);
  models().set_loading(name, true);
  try {
    std::thread([bc, job] {
      try {
        job->model->engine = create_engine(job->model->options);
      } catch (const std::exception& e) {
        job->error = e.what();
      } catch (...) {
        job->error = "unknown error";
      }
      rm::UnblockClient(bc, job);  // never NULL: load_free owns the job
    }).detach();
  } catch (const std::exception& e) {
    models().set_loading(name, false);
    rm::AbortBlock(bc);
    delete job;
    return reply_error(ctx, std::string("cannot start a loader thread: ") + e.what());
  }
  return REDISMODULE_OK;
}

}  // namespace infer::redis
