// Model files as operators handle them: rewritten (cp over them) while INFER.LOAD reads them, and paths
// holding a NUL byte. Issue 49: neither may take the server down or open another file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_server.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string run(redisContext* c, const std::vector<std::string>& argv) { return show(command(c, argv).get()); }

// A model directory of this test's own, removed at the end.
struct OwnModelDir {
  fs::path root = fs::temp_directory_path() / ("infer-modelfiles-" + std::to_string(::getpid()));
  OwnModelDir() {
    fs::create_directories(root);
    fs::copy_file(stories_model_path(), root / "m.gguf", fs::copy_options::overwrite_existing);
  }
  ~OwnModelDir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

// As cp over an existing file does: truncate, then write the same bytes back in 32 KiB pieces, over
// and over until told to stop. The contents are the same each time, so a load that reads a whole
// file reads the model.
void rewrite_until(const std::string& path, const std::atomic<bool>& stop, std::atomic<int>& rewrites) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  while (!stop) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
    if (fd < 0) return;
    for (size_t at = 0; at < bytes.size();) {
      const ssize_t n = ::write(fd, bytes.data() + at, std::min<size_t>(32 << 10, bytes.size() - at));
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    ::close(fd);
    ++rewrites;
  }
}

TEST(ModelFiles, LoadsOfAFileRewrittenMeanwhileReplyOkOrAnErrorAndTheServerStaysUp) {
  INFER_REQUIRE_DIR(models_dir());
  OwnModelDir dir;
  RedisServer server({.module_args = {"MODEL-DIR", dir.root.string()}});
  RedisConn c = server.connect();
  std::atomic<bool> stop{false};
  std::atomic<int> rewrites{0};
  std::thread writer(rewrite_until, (dir.root / "m.gguf").string(), std::cref(stop), std::ref(rewrites));
  int ok = 0, refused = 0;
  for (int i = 0; i < 200 && server.alive(); ++i) {
    const std::string r = run(c.get(), {"INFER.LOAD", "m", "m.gguf"});
    if (r == "OK") {
      ++ok;
      EXPECT_EQ(run(c.get(), {"INFER.UNLOAD", "m"}), "OK");
    } else {
      ++refused;
      EXPECT_TRUE(contains(r, "(error) ERR cannot load model 'm': ")) << r;
    }
  }
  stop = true;
  writer.join();
  ASSERT_TRUE(server.alive()) << "after " << ok << " loads and " << refused << " refusals\n" << server.log();
  EXPECT_GT(rewrites.load(), 0);
  std::printf("[ measured ] %d loads, %d refused, over %d rewrites of the file\n", ok, refused, rewrites.load());
  // Left alone, the file loads and generates.
  EXPECT_EQ(run(c.get(), {"INFER.LOAD", "m", "m.gguf"}), "OK");
  EXPECT_EQ(run(c.get(), {"INFER.GENERATE", "m", "PROMPT", "Once", "MAXTOKENS", "3"}).rfind("(error)", 0),
            std::string::npos);
}

TEST(ModelFiles, ALoadPathWithANulByteIsRefused) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server({.module_args = {"MODEL-DIR", stories_model_dir()}});
  RedisConn c = server.connect();
  // Cut at the NUL this would name stories.gguf, which exists: it must not be loaded.
  const std::string r = run(c.get(), {"INFER.LOAD", "m", "stories.gguf\0.bak"s});
  EXPECT_EQ(r, "(error) ERR model path 'stories.gguf...' holds a NUL byte (byte 12): paths cannot contain NUL");
  EXPECT_EQ(run(c.get(), {"INFER.MODELS"}), "[]");
  EXPECT_EQ(run(c.get(), {"INFER.LOAD", "m", "stories.gguf"}), "OK");
}

// Module arguments come over the protocol with MODULE LOADEX, where they may hold a NUL.
TEST(ModelFiles, StartupPathsAndKeywordsWithANulByteAreRefused) {
  INFER_REQUIRE_DIR(models_dir());
  RedisServer server(RedisServerOptions{.server_args = {"--enable-module-command", "yes"}, .load_module = false});
  RedisConn c = server.connect();
  auto loadex = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"MODULE", "LOADEX", redis_module_path(), "ARGS"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(c.get(), argv);
  };
  EXPECT_TRUE(contains(loadex({"MODEL", "s", stories_model_path() + "\0x"s}), "(error)"));
  EXPECT_TRUE(contains(server.log(), "MODEL s path '" + stories_model_path() + "...' holds a NUL byte")) << server.log();
  EXPECT_TRUE(contains(loadex({"MODEL-DIR", stories_model_dir() + "\0/x"s}), "(error)"));
  EXPECT_TRUE(contains(server.log(), "MODEL-DIR '" + stories_model_dir() + "...' holds a NUL byte")) << server.log();
  EXPECT_TRUE(contains(loadex({"MODEL\0x"s, "s", stories_model_path()}), "(error)"));
  EXPECT_TRUE(contains(server.log(), "unknown module argument")) << server.log();
  EXPECT_EQ(loadex({"MODEL", "s", stories_model_path()}), "OK") << server.log();
  EXPECT_EQ(run(c.get(), {"INFER.MODELS"}), "[s]");
}

}  // namespace
}  // namespace infer::test
