// The schema corpus and the python3-jsonschema validator for tests.
#include "support/json_schema_check.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace infer::test {
namespace fs = std::filesystem;

std::vector<SchemaCase> schema_corpus() {
  std::vector<SchemaCase> out;
  for (const auto& entry : fs::directory_iterator(fs::path(INFER_SOURCE_DIR) / "tests/grammar/schemas")) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream f(entry.path());
    const auto j = nlohmann::ordered_json::parse(f);
    SchemaCase c;
    c.name = entry.path().stem().string();
    c.schema = j.at("schema");
    c.valid = j.at("valid").get<std::vector<std::string>>();
    c.invalid = j.at("invalid").get<std::vector<std::string>>();
    c.bounded = j.at("bounded").get<bool>();
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::vector<std::string> python_schema_verdicts(const nlohmann::ordered_json& schema,
                                                const std::vector<std::string>& texts) {
  const fs::path job = fs::temp_directory_path() / ("infer-schema-job-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream f(job);
    f << nlohmann::ordered_json{{"schema", schema}, {"texts", texts}}.dump();
  }
  const std::string cmd = "/usr/bin/python3 " + (fs::path(INFER_SOURCE_DIR) / "tests/support/validate_json_schema.py").string() +
                          " " + job.string();
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0) out.append(buf, n);
  const int status = ::pclose(pipe.release());
  fs::remove(job);
  if (status != 0) throw std::runtime_error(cmd + " failed (status " + std::to_string(status) + "): " + out);
  return nlohmann::json::parse(out).get<std::vector<std::string>>();
}

}  // namespace infer::test
