// File::open refuses what is not a regular file, at once: a FIFO must not wait for a writer.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>

#include "gguf/file.h"

namespace infer::gguf {
namespace {

// What File::open(path) throws, or "" when it opens; fails the test when it takes over five seconds.
std::string open_error(const std::string& path) {
  auto opened = std::async(std::launch::async, [path]() -> std::string {
    try {
      File::open(path);
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  });
  if (opened.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "File::open(" << path << ") still waiting after 5 s";
    std::abort();  // the thread cannot be abandoned: a hang is the failure
  }
  return opened.get();
}

TEST(FileOpen, RefusesAFifoWithoutWaitingForAWriter) {
  const std::string fifo =
      (std::filesystem::temp_directory_path() / ("infer-gguf-fifo-" + std::to_string(::getpid()))).string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string err = open_error(fifo);
  std::filesystem::remove(fifo);
  EXPECT_EQ(err, fifo + ": not a regular file");
}

TEST(FileOpen, RefusesADirectory) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(open_error(dir), dir + ": not a regular file");
}

}  // namespace
}  // namespace infer::gguf
