// Module loading, configs, model registry commands, INFO and STATS against a real redis-server.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

// The suite's own model directory: a copy of the model, a file that is not a model, and a symlink that
// points out of the directory. Created once per process, removed at exit.
const std::string& own_model_dir() {
  namespace fs = std::filesystem;
  struct RemovedAtExit {
    fs::path root = fs::temp_directory_path() / ("infer-model-dir-" + std::to_string(::getpid()));
    ~RemovedAtExit() {
      std::error_code ec;
      fs::remove_all(root, ec);
    }
  };
  static const RemovedAtExit tree;
  static const std::string dir = [] {
    fs::path d = tree.root / "a" / "b" / "models";
    fs::create_directories(d);
    fs::copy_file(stories_model_path(), d / "stories260K.gguf", fs::copy_options::overwrite_existing);
    std::ofstream(d / "notes.txt") << "not a model\n";
    fs::remove(d / "escape.gguf");
    fs::create_symlink(stories_model_path(), d / "escape.gguf");
    return d.string();
  }();
  return dir;
}

class ModuleTest : public SharedServerTest<ModuleTest> {
 public:
  static std::vector<std::string> module_args() {
    return {"MODEL", "stories", stories_model_path(), "MODEL-DIR", own_model_dir(), "QUEUE", "8"};
  }
};

TEST_F(ModuleTest, ListsAndDescribesStartupModel) {
  EXPECT_EQ(run({"INFER.MODELS"}), "[stories]");
  Reply r = command(c_.get(), {"INFER.INFO", "stories"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  std::string s = show(r.get());
  EXPECT_NE(s.find("n_vocab, 512"), std::string::npos) << s;
  EXPECT_NE(s.find("queue_depth, 8"), std::string::npos) << s;
  EXPECT_EQ(run({"INFER.INFO", "nope"}), "(error) ERR unknown model 'nope'");
}

TEST_F(ModuleTest, ConfigsAreVisibleAndSettable) {
  EXPECT_EQ(run({"CONFIG", "GET", "infer.queue-depth"}), "[infer.queue-depth, 8]");
  EXPECT_EQ(run({"CONFIG", "SET", "infer.timeout-ms", "1234"}), "OK");
  EXPECT_EQ(run({"CONFIG", "GET", "infer.timeout-ms"}), "[infer.timeout-ms, 1234]");
  EXPECT_EQ(run({"CONFIG", "SET", "infer.timeout-ms", "60000"}), "OK");
  EXPECT_NE(run({"CONFIG", "SET", "infer.queue-depth", "0"}).find("(error)"), std::string::npos);
  // The model directory bounds INFER.LOAD: immutable at run time.
  EXPECT_NE(run({"CONFIG", "SET", "infer.model-dir", "/"}).find("(error)"), std::string::npos);
}

TEST_F(ModuleTest, LoadOnlyInsideModelDir) {
  EXPECT_NE(run({"INFER.LOAD", "x", "/etc/passwd"}).find("outside the model directory"), std::string::npos);
  // Outside whether or not the target exists, and however deep the directory is.
  EXPECT_NE(run({"INFER.LOAD", "x", "../../../etc/passwd"}).find("outside the model directory"), std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "x", "../no-such.gguf"}).find("outside the model directory"), std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "x", "sub/../../models/../x.gguf"}).find("outside the model directory"),
            std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "x", "escape.gguf"}).find("outside the model directory"), std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "x", "missing.gguf"}).find("not found"), std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "x", own_model_dir() + "/missing.gguf"}).find("not found"), std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "x", "notes.txt"}).find("cannot load model 'x'"), std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "stories", "stories260K.gguf"}).find("already loaded"), std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "y", "stories260K.gguf", "BOGUS", "1"}).find("unknown option"), std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "y", "stories260K.gguf", "QUEUE", "zero"}).find("QUEUE must be"), std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "y", "stories260K.gguf", "WEIGHTS", "disk"}).find("WEIGHTS must be copy"),
            std::string::npos);
  EXPECT_NE(run({"INFER.LOAD", "y"}).find("wrong number"), std::string::npos);
}

TEST_F(ModuleTest, LoadUseUnload) {
  EXPECT_EQ(run({"INFER.LOAD", "second", "stories260K.gguf", "QUEUE", "4", "CONTEXT", "256"}), "OK");
  EXPECT_EQ(run({"INFER.MODELS"}), "[second, stories]");
  EXPECT_NE(show(command(c_.get(), {"INFER.INFO", "second"}).get()).find("context, 256"), std::string::npos);
  EXPECT_NE(show(command(c_.get(), {"INFER.INFO", "second"}).get()).find("weights, copy"), std::string::npos);
  EXPECT_EQ(run({"INFER.GENERATE", "second", "PROMPT", "Once", "MAXTOKENS", "4", "TEMP", "0"}),
            run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4", "TEMP", "0"}));
  // The mapped file gives the same tokens as the huge-page copy.
  EXPECT_EQ(run({"INFER.LOAD", "mapped", "stories260K.gguf", "WEIGHTS", "mmap"}), "OK");
  EXPECT_NE(show(command(c_.get(), {"INFER.INFO", "mapped"}).get()).find("weights, mmap"), std::string::npos);
  EXPECT_NE(show(command(c_.get(), {"INFER.INFO", "mapped"}).get()).find("interleaved_matrices, 0"), std::string::npos);
  EXPECT_EQ(run({"INFER.GENERATE", "mapped", "PROMPT", "Once", "MAXTOKENS", "4", "TEMP", "0"}),
            run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "4", "TEMP", "0"}));
  EXPECT_EQ(run({"INFER.UNLOAD", "mapped"}), "OK");
  EXPECT_EQ(run({"INFER.UNLOAD", "second"}), "OK");
  EXPECT_EQ(run({"INFER.UNLOAD", "second"}), "(error) ERR unknown model 'second'");
  EXPECT_EQ(run({"INFER.MODELS"}), "[stories]");
}

TEST_F(ModuleTest, LoadRefusedInsideMulti) {
  EXPECT_EQ(run({"MULTI"}), "OK");
  EXPECT_EQ(run({"INFER.LOAD", "m", "stories260K.gguf"}), "QUEUED");
  EXPECT_NE(run({"EXEC"}).find("INFER.LOAD blocks the client and cannot run inside MULTI/EXEC"), std::string::npos);
  EXPECT_EQ(run({"INFER.MODELS"}), "[stories]");
}

TEST_F(ModuleTest, UnloadWhileGeneratingLetsRequestFinish) {
  ASSERT_EQ(run({"INFER.LOAD", "temp", "stories260K.gguf"}), "OK");
  RedisConn other = server_->connect();
  redisAppendCommand(other.get(), "INFER.GENERATE temp PROMPT Once MAXTOKENS 200 TEMP 0");
  int done = 0;
  while (!done) ASSERT_EQ(redisBufferWrite(other.get(), &done), REDIS_OK);
  // Unload only once the request is queued (the two connections are not ordered otherwise).
  auto accepted = [&] {
    std::string s = run({"INFER.STATS", "temp"});
    return s.find("queued, 0, running, 0, completed, 0") == std::string::npos;
  };
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!accepted() && std::chrono::steady_clock::now() < end) std::this_thread::yield();
  EXPECT_EQ(run({"INFER.UNLOAD", "temp"}), "OK");
  void* raw = nullptr;
  ASSERT_EQ(redisGetReply(other.get(), &raw), REDIS_OK);
  Reply r(static_cast<redisReply*>(raw));
  EXPECT_EQ(r->type, REDIS_REPLY_STRING) << show(r.get());
  EXPECT_EQ(run({"PING"}), "PONG");
}

// Niceness of every thread of process `pid`, by thread id (field 19 of /proc/pid/task/tid/stat). A
// thread that exits while the directory is read (an engine freed by another test) is left out.
std::map<pid_t, int> thread_nice(pid_t pid) {
  std::map<pid_t, int> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream f(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    std::string field;
    for (int i = 3; i <= 19 && rest >> field; ++i) {
    }
    if (!rest) continue;
    out[static_cast<pid_t>(std::stoi(task.path().filename().string()))] = std::stoi(field);
  }
  return out;
}

TEST_F(ModuleTest, ComputeThreadsYieldToTheMainThread) {
  EXPECT_EQ(run({"CONFIG", "GET", "infer.nice"}), "[infer.nice, 10]");
  // Wake the engine (its threads exist from load; a request makes sure all have started).
  EXPECT_EQ(run({"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "2", "TEMP", "0"}).rfind("(error)", 0),
            std::string::npos);
  std::map<pid_t, int> nice = thread_nice(server_->pid());
  std::string seen;  // every thread's niceness, for the failure message
  for (const auto& [tid, n] : nice) seen += " " + std::to_string(tid) + ":" + std::to_string(n);
  ASSERT_TRUE(nice.count(server_->pid())) << "threads:" << seen;
  EXPECT_EQ(nice.at(server_->pid()), 0) << "Redis's main thread keeps its priority; threads:" << seen;
  int niced = 0;
  for (const auto& [tid, n] : nice) niced += n == 10;
  EXPECT_GE(niced, 1) << "the scheduler thread (and compute workers) run at nice 10; threads:" << seen;
}

// Under Debian's systemd unit a seccomp filter kills the server on setpriority: the module then leaves
// its threads at normal priority (and says so in the log) instead of taking Redis down.
TEST(ModuleSeccomp, UnderASetpriorityFilterThreadsKeepNormalPriority) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL", "stories", stories_model_path()}, .seccomp_like_systemd = true});
  RedisConn c = server.connect();
  const std::string text = show(command(c.get(), {"INFER.GENERATE", "stories", "PROMPT", "Once", "MAXTOKENS", "8"}).get());
  EXPECT_EQ(text.rfind("(error)", 0), std::string::npos) << text;
  EXPECT_TRUE(server.alive()) << server.log();
  EXPECT_NE(server.log().find("seccomp filter is active"), std::string::npos) << server.log();
  for (const auto& [tid, n] : thread_nice(server.pid())) EXPECT_EQ(n, 0) << "thread " << tid;
}

TEST_F(ModuleTest, InfoSectionAndStats) {
  run({"INFER.GENERATE", "stories", "PROMPT", "Hi", "MAXTOKENS", "3"});
  std::string info = run({"INFO", "infer"});
  for (const char* f : {"infer_queued:", "infer_running:", "infer_completed:", "infer_rejected:", "infer_timeouts:",
                        "infer_cancelled:", "infer_tokens_generated:", "infer_tokens_per_second:",
                        "infer_prefix_cache_hit_rate:", "infer_kv_pages_used:", "infer_model_stories:",
                        "infer_max_main_thread_stall_us:"})
    EXPECT_NE(info.find(f), std::string::npos) << f << "\n" << info;
  std::string stats = run({"INFER.STATS"});
  EXPECT_NE(stats.find("max_main_thread_stall_us"), std::string::npos) << stats;
  EXPECT_NE(stats.find("infer.generate"), std::string::npos) << stats;
  EXPECT_NE(run({"INFER.STATS", "stories"}).find("tokens_generated"), std::string::npos);
  EXPECT_EQ(run({"INFER.STATS", "nope"}), "(error) ERR unknown model 'nope'");
}

TEST_F(ModuleTest, CommandInfoDeclaresKeySpecs) {
  std::string s = run({"COMMAND", "INFO", "infer.tokenize"});
  EXPECT_NE(s.find("STORE"), std::string::npos) << s;
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.TOKENIZE", "m", "text", "NOBOS", "STORE", "k1"}), "[k1]");
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.DETOKENIZE", "m", "KEY", "k2"}), "[k2]");
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.EMBED", "m", "text", "POOLING", "mean", "STORE", "vs", "el", "SETATTR",
                 "{}"}),
            "[vs]");
  EXPECT_EQ(run({"COMMAND", "GETKEYS", "INFER.GENERATE", "m", "TOKENS", "a", "b", "PROMPT", "x", "STREAM", "s"}),
            "[a, b, s]");
}

TEST(ModuleLoad, BadArgumentsRefuseToStart) {
  EXPECT_THROW(RedisServer({.module_args = {"QUEUE", "-1"}, .start_timeout_ms = 5000}), std::runtime_error);
  EXPECT_THROW(RedisServer({.module_args = {"NOSUCH", "1"}, .start_timeout_ms = 5000}), std::runtime_error);
  EXPECT_THROW(RedisServer({.module_args = {"MODEL", "m", "/nonexistent.gguf"}, .start_timeout_ms = 5000}),
               std::runtime_error);
}

TEST(ModuleLoad, LoadDisabledWithoutModelDir) {
  RedisServer server;
  RedisConn c = server.connect();
  EXPECT_NE(show(command(c.get(), {"INFER.LOAD", "x", stories_model_path()}).get()).find("INFER.LOAD is disabled"),
            std::string::npos);
  EXPECT_EQ(show(command(c.get(), {"INFER.MODELS"}).get()), "[]");
}

}  // namespace
}  // namespace infer::test
