// Files shared by the gguf tests: a per-process temp directory and a small valid file that exercises
// every value type and a few tensors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace infer::gguf::test {

// A fresh path inside this process's temp directory (removed at exit).
std::string temp_path(const std::string& name);
std::vector<uint8_t> read_bytes(const std::string& path);

// Writes, with gguf::Writer, a small file holding all 13 value types (a nested array included) and
// three tensors (F32, Q8_0, Q4_K). The last tensor's size is a multiple of the alignment, so the
// file has no trailing padding: every shorter prefix is invalid.
std::string write_small_valid_file();

}  // namespace infer::gguf::test
