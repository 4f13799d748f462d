// Where tests find the shared data (models, tokenizer vectors, reference outputs).
// Each directory comes from an environment variable with a default relative to the source tree.
#pragma once
#include <filesystem>
#include <string>

namespace infer::test {

// INFER_MODELS_DIR, default <repo>/../shared/models.
std::string models_dir();
// INFER_VECTORS_DIR, default <repo>/../shared/tokenizer-vectors.
std::string vectors_dir();
// INFER_REFERENCE_DIR, default <repo>/../shared/reference.
std::string reference_dir();
// INFER_CHAT_TEMPLATES_DIR, default: beside the models dir (<models>/../chat-templates).
std::string chat_templates_dir();
// The source tree this test binary was built from (for files it checks, such as docs/*.md).
std::string source_dir();

// True when running under CI (CI=true): a missing data dir is then a failure, not a skip.
bool in_ci();

}  // namespace infer::test

// Skips the current test when `dir` does not exist, or fails it under CI.
#define INFER_REQUIRE_DIR(dir)                                                                   \
  do {                                                                                           \
    if (!std::filesystem::is_directory(dir)) {                                                   \
      if (::infer::test::in_ci()) FAIL() << "test data directory missing: " << (dir);            \
      GTEST_SKIP() << "test data directory missing: " << (dir);                                  \
    }                                                                                            \
  } while (0)
