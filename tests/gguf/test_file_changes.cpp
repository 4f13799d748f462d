// A model file that shrinks or is rewritten while File::open reads it (cp over a model during
// INFER.LOAD) is an Error naming the problem, mapped or copied, never SIGBUS. The open's test seam
// changes the file after its size was read and before any byte is.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "gguf_test_files.h"

namespace infer::gguf {
namespace {

using test::read_bytes;
using test::temp_path;

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A private copy of the small valid file, so that a test may damage it.
std::string fresh_copy(const std::string& name) {
  const std::string path = temp_path(name);
  write_bytes(path, read_bytes(test::write_small_valid_file()));
  return path;
}

// What File::open throws when `change` runs between its stat and its first read; "" when it opens.
std::string open_error(const std::string& path, bool copy, const std::function<void()>& change) {
  OpenOptions o;
  o.huge_page_copy = copy;
  o.after_size_known = change;
  try {
    File::open(path, o);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(FileChanges, AFileTruncatedToNothingAfterItsStatIsAnError) {
  for (const bool copy : {false, true}) {
    const std::string path = fresh_copy("emptied.gguf");
    const std::string err = open_error(path, copy, [&] { std::filesystem::resize_file(path, 0); });
    EXPECT_TRUE(contains(err, path + ": cannot read: the file shrank while being read")) << copy << ": " << err;
  }
}

TEST(FileChanges, AFileCutAfterItsHeaderIsAnError) {
  const uint64_t data_offset = File::open(test::write_small_valid_file())->data_offset();
  for (const bool copy : {false, true}) {
    const std::string path = fresh_copy("cut.gguf");
    const std::string err = open_error(path, copy, [&] { std::filesystem::resize_file(path, data_offset); });
    EXPECT_TRUE(contains(err, "the file shrank while being read")) << copy << ": " << err;
  }
}

TEST(FileChanges, AFileRewrittenWhileReadIsAnError) {
  for (const bool copy : {false, true}) {
    const std::string path = fresh_copy("rewritten.gguf");
    const std::vector<uint8_t> bytes = read_bytes(path);
    // Same size, new contents: what cp over the file leaves once it has finished.
    const std::string err = open_error(path, copy, [&] {
      write_bytes(path, bytes);
      const struct timespec later[2] = {{0, UTIME_OMIT}, {::time(nullptr) + 10, 0}};
      ::utimensat(AT_FDCWD, path.c_str(), later, 0);
    });
    EXPECT_TRUE(contains(err, "the file changed while being read")) << copy << ": " << err;
    EXPECT_EQ(open_error(path, copy, nullptr), "") << "the same file opens once it is left alone";
  }
}

// Metadata larger than the first read of a mapped file's header: the prefix grows until it fits, and
// the result equals the copy's.
TEST(FileChanges, AHeaderLargerThanTheFirstReadParsesAsInACopy) {
  const std::string path = temp_path("big_header.gguf");
  {
    Writer w;
    w.add_string("general.architecture", "llama");
    w.add_string("big.one", std::string(3u << 20, 'x'));
    std::vector<std::string> words;
    for (int i = 0; i < 100000; ++i) words.push_back("w" + std::to_string(i));
    w.add_array("big.words", std::span<const std::string>(words));
    const float row[32] = {1.5f};
    w.add_tensor("t", TensorType::F32, {32}, row);
    w.write(path);
  }
  OpenOptions copy;
  copy.huge_page_copy = true;
  const auto mapped = File::open(path);
  const auto copied = File::open(path, copy);
  ASSERT_GT(mapped->data_offset(), 4u << 20);
  EXPECT_EQ(mapped->data_offset(), copied->data_offset());
  EXPECT_EQ(mapped->get_string("big.one"), std::string(3u << 20, 'x'));
  ASSERT_EQ(mapped->find("big.words")->array_size(), 100000u);
  EXPECT_EQ(mapped->find("big.words")->as_array()[99999].as_string(), "w99999");
  ASSERT_NE(mapped->tensor("t"), nullptr);
  EXPECT_EQ(std::memcmp(mapped->tensor("t")->data, copied->tensor("t")->data, sizeof(float) * 32), 0);
  float first = 0;
  std::memcpy(&first, mapped->tensor("t")->data, sizeof first);
  EXPECT_EQ(first, 1.5f);
}

}  // namespace
}  // namespace infer::gguf
