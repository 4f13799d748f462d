// Issue 19: the module must never take Redis down. Loads that do not fit memory, bad settings, files
// that are not files, oversized token keys and model names that break INFO, each against a real
// redis-server with the module.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Writes a copy of stories260K with llama.context_length replaced.
void write_with_context(const std::string& path, uint32_t context_length) {
  auto src = gguf::File::open(stories_model_path());
  gguf::Writer w(src->alignment());
  for (const auto& [key, value] : src->metadata()) {
    if (key == "general.alignment") continue;  // the writer sets it from the constructor
    if (key == "llama.context_length")
      w.add_uint32(key, context_length);
    else
      w.add_kv(key, value);
  }
  for (const auto& t : src->tensors())
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + (t.n_dims ? t.n_dims : 1)), t.data);
  w.write(path);
}

// The suite's model directory: stories260K, a copy trained (on paper) for 65536 tokens, and a FIFO.
// Created once per process, removed at exit.
const std::string& model_dir() {
  struct RemovedAtExit {
    fs::path root = fs::temp_directory_path() / ("infer-opsafety-" + std::to_string(::getpid()));
    ~RemovedAtExit() {
      std::error_code ec;
      fs::remove_all(root, ec);
    }
  };
  static const RemovedAtExit tree;
  static const std::string dir = [] {
    fs::create_directories(tree.root);
    fs::copy_file(stories_model_path(), tree.root / "stories260K.gguf", fs::copy_options::overwrite_existing);
    write_with_context((tree.root / "long.gguf").string(), 65536);
    ::mkfifo((tree.root / "fifo.gguf").c_str(), 0600);
    return tree.root.string();
  }();
  return dir;
}

std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

// The value of `field` in INFO infer, or "" when absent.
std::string info_field(redisContext* c, const std::string& field) {
  const std::string info = run(c, {"INFO", "infer"});
  const size_t at = info.find("\n" + field + ":");
  if (at == std::string::npos) return "";
  const size_t start = at + field.size() + 2;
  return info.substr(start, info.find_first_of("\r\n", start) - start);
}

// Startup must fail, with `why` in the server's log (the test helper puts the log in the exception).
void expect_startup_refused(const std::vector<std::string>& module_args, const std::string& why) {
  try {
    RedisServer server({.module_args = module_args, .start_timeout_ms = 5000});
    ADD_FAILURE() << "the server started with arguments that should be refused";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), why)) << e.what();
  }
}

// --- bug 4: INFER.LOAD plans memory before allocating ---

TEST(OperatorSafety, LoadThatDoesNotFitMemoryIsRefusedWithTheNumbers) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL-DIR", model_dir()}});
  RedisConn c = server.connect();
  const auto start = std::chrono::steady_clock::now();
  const std::string r = run(c.get(), {"INFER.LOAD", "huge", "long.gguf", "MAX-RUNNING", "4096", "CONTEXT", "65536"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "nothing is allocated first";
  EXPECT_TRUE(contains(r, "cannot load model 'huge': needs ")) << r;
  EXPECT_TRUE(contains(r, "KV pool ")) << r;
  EXPECT_TRUE(contains(r, " GiB for 4096 sequences x 65536 tokens")) << r;
  EXPECT_TRUE(contains(r, "weights ")) << r;
  EXPECT_TRUE(contains(r, "scratch ")) << r;
  EXPECT_TRUE(contains(r, "is available")) << r;
  EXPECT_TRUE(server.alive());
  EXPECT_EQ(run(c.get(), {"INFER.MODELS"}), "[]");
  // The name is free again, and a load that fits still works.
  EXPECT_EQ(run(c.get(), {"INFER.LOAD", "huge", "long.gguf", "MAX-RUNNING", "2", "CONTEXT", "256"}), "OK");
}

TEST(OperatorSafety, StartupModelThatDoesNotFitMemoryRefusesToStart) {
  INFER_REQUIRE_DIR(models_dir());
  expect_startup_refused({"MODEL", "huge", model_dir() + "/long.gguf", "MAX-RUNNING", "4096", "CONTEXT", "65536"},
                         "is available");
  expect_startup_refused({"MAX-MEMORY", "1000", "MODEL", "stories", stories_model_path()}, "infer.max-memory");
}

TEST(OperatorSafety, MaxMemoryCountsModelsAlreadyLoaded) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL-DIR", model_dir()}});
  RedisConn c = server.connect();
  EXPECT_EQ(run(c.get(), {"CONFIG", "GET", "infer.max-memory"}), "[infer.max-memory, 0]");
  EXPECT_EQ(info_field(c.get(), "infer_memory_bytes"), "0");
  ASSERT_EQ(run(c.get(), {"INFER.LOAD", "a", "stories260K.gguf"}), "OK");
  const long long one = std::stoll(info_field(c.get(), "infer_memory_bytes"));
  ASSERT_GT(one, 0);
  // A second copy with the same options plans the same bytes: one byte short of both is refused.
  ASSERT_EQ(run(c.get(), {"CONFIG", "SET", "infer.max-memory", std::to_string(2 * one - 1)}), "OK");
  const std::string r = run(c.get(), {"INFER.LOAD", "b", "stories260K.gguf"});
  EXPECT_TRUE(contains(r, "cannot load model 'b': needs ")) << r;
  EXPECT_TRUE(contains(r, "infer.max-memory is ")) << r;
  EXPECT_TRUE(contains(r, "loaded models hold ")) << r;
  ASSERT_EQ(run(c.get(), {"CONFIG", "SET", "infer.max-memory", std::to_string(2 * one)}), "OK");
  EXPECT_EQ(run(c.get(), {"INFER.LOAD", "b", "stories260K.gguf"}), "OK");
  EXPECT_EQ(std::stoll(info_field(c.get(), "infer_memory_bytes")), 2 * one);
  // Unloading gives the bytes back once the engine is gone (it is destroyed off the main thread).
  EXPECT_EQ(run(c.get(), {"INFER.UNLOAD", "b"}), "OK");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::stoll(info_field(c.get(), "infer_memory_bytes")) != one && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(std::stoll(info_field(c.get(), "infer_memory_bytes")), one);
}

}  // namespace
}  // namespace infer::test
