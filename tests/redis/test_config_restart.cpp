// A config accepted at run time must not stop the next start (issue 49): infer.max-memory below what
// the loaded models hold is refused by CONFIG SET, and a start whose cap leaves no room for a MODEL
// line starts without that model, saying why in the log.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

const char* const kLeftOut = "infer: MODEL stories not loaded, the server starts without it: ";

TEST(ConfigRestart, MaxMemoryBelowWhatTheLoadedModelsHoldIsRefused) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL", "stories", stories_model_path()}});
  RedisConn c = server.connect();
  const std::string held = info_value(c.get(), "infer", "infer_memory_bytes");
  ASSERT_GT(std::stoll(held), 1024);
  const std::string r = run(c.get(), {"CONFIG", "SET", "infer.max-memory", "1kb"});
  EXPECT_TRUE(contains(r, "infer.max-memory 1024 is below the " + held + " bytes the loaded models hold (stories "))
      << r;
  EXPECT_TRUE(contains(r, "MiB): unload models first")) << r;
  EXPECT_EQ(run(c.get(), {"CONFIG", "GET", "infer.max-memory"}), "[infer.max-memory, 0]");
  // One byte short is refused; exactly what they hold, and no cap, are accepted.
  EXPECT_TRUE(contains(run(c.get(), {"CONFIG", "SET", "infer.max-memory", std::to_string(std::stoll(held) - 1)}),
                       "(error)"));
  EXPECT_EQ(run(c.get(), {"CONFIG", "SET", "infer.max-memory", held}), "OK");
  EXPECT_EQ(run(c.get(), {"CONFIG", "SET", "infer.max-memory", "0"}), "OK");
  // Once the model is unloaded (and its engine gone) the small cap is accepted.
  ASSERT_EQ(run(c.get(), {"INFER.UNLOAD", "stories"}), "OK");
  for (int i = 0; i < 500 && info_value(c.get(), "infer", "infer_memory_bytes") != "0"; ++i) usleep(10000);
  EXPECT_EQ(run(c.get(), {"CONFIG", "SET", "infer.max-memory", "1kb"}), "OK");
}

TEST(ConfigRestart, AStartupModelOverTheCapIsLeftOutWithTheReasonLogged) {
  INFER_REQUIRE_DIR(models_dir());
  // The cap as a module argument and as a config (what a config file line sets).
  for (const RedisServerOptions& o :
       {RedisServerOptions{.module_args = {"MAX-MEMORY", "1000", "MODEL", "stories", stories_model_path()}},
        RedisServerOptions{.module_args = {"MODEL", "stories", stories_model_path()},
                           .server_args = {"--infer.max-memory", "1000"}}}) {
    RedisServer server(o);
    RedisConn c = server.connect();
    EXPECT_EQ(run(c.get(), {"INFER.MODELS"}), "[]");
    const std::string log = server.log();
    EXPECT_TRUE(contains(log, kLeftOut)) << log;
    EXPECT_TRUE(contains(log, "infer.max-memory is 1000 B")) << log;
  }
}

// The whole operator path: settings changed at run time, CONFIG REWRITE, a cap edited into the file,
// restart from it.
TEST(ConfigRestart, RestartFromARewrittenConfigWhoseCapIsTooSmallStartsWithoutTheModel) {
  INFER_REQUIRE_DIR(models_dir());
  const fs::path dir = fs::temp_directory_path() / ("infer-config-restart-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string conf = (dir / "redis.conf").string();
  std::ofstream(conf) << "# written by CONFIG REWRITE below\n";
  {
    RedisServer first({.module_args = {"MODEL", "stories", stories_model_path()}, .config_file = conf});
    RedisConn c = first.connect();
    EXPECT_TRUE(contains(run(c.get(), {"CONFIG", "SET", "infer.max-memory", "1kb"}), "(error)"));
    ASSERT_EQ(run(c.get(), {"CONFIG", "SET", "infer.context", "64"}), "OK");
    ASSERT_EQ(run(c.get(), {"CONFIG", "REWRITE"}), "OK");
  }
  // The first server's directory is gone with it: keep the rewritten file but its dir and logfile.
  std::string kept;
  std::ifstream in(conf);
  for (std::string line; std::getline(in, line);)
    if (!line.starts_with("dir ") && !line.starts_with("logfile ")) kept += line + "\n";
  ASSERT_TRUE(contains(kept, "loadmodule ")) << kept;
  std::ofstream(conf) << kept << "infer.max-memory 1kb\n";
  RedisServer second({.config_file = conf, .load_module = false});
  RedisConn c = second.connect();
  EXPECT_EQ(run(c.get(), {"INFER.MODELS"}), "[]");
  EXPECT_EQ(run(c.get(), {"CONFIG", "GET", "infer.context"}), "[infer.context, 64]");
  EXPECT_EQ(run(c.get(), {"CONFIG", "GET", "infer.max-memory"}), "[infer.max-memory, 1024]");
  const std::string log = second.log();
  EXPECT_TRUE(contains(log, kLeftOut)) << log;
  EXPECT_TRUE(contains(log, "infer.max-memory is 1.0 KiB")) << log;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace infer::test
