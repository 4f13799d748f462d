#include "support/data_dirs.h"

#include <cstdlib>
#include <filesystem>
#include <cstring>

#ifndef INFER_SOURCE_DIR
#define INFER_SOURCE_DIR "."
#endif

namespace infer::test {
namespace {
std::string from_env(const char* name, const char* fallback_under_shared) {
  if (const char* v = std::getenv(name); v && *v) return v;
  return std::string(INFER_SOURCE_DIR) + "/../shared/" + fallback_under_shared;
}
}  // namespace

std::string models_dir() { return from_env("INFER_MODELS_DIR", "models"); }
std::string vectors_dir() { return from_env("INFER_VECTORS_DIR", "tokenizer-vectors"); }
std::string reference_dir() { return from_env("INFER_REFERENCE_DIR", "reference"); }
std::string chat_templates_dir() {
  if (const char* v = std::getenv("INFER_CHAT_TEMPLATES_DIR"); v && *v) return v;
  return (std::filesystem::path(models_dir()).parent_path() / "chat-templates").string();
}

std::string source_dir() { return INFER_SOURCE_DIR; }

bool in_ci() {
  const char* v = std::getenv("CI");
  return v && (std::strcmp(v, "true") == 0 || std::strcmp(v, "1") == 0);
}

}  // namespace infer::test
