// Loader for the reference outputs (reference_data.h).
#include "reference_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "support/data_dirs.h"

namespace infer::test {
namespace {

TopLogits parse_top(const nlohmann::json& j) {
  TopLogits out;
  for (const auto& pair : j) out.emplace_back(pair.at(0).get<int32_t>(), pair.at(1).get<float>());
  return out;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

double ReferenceRecord::sigma() const {
  const auto& v = steps_full.at(0);
  double mean = 0;
  for (float x : v) mean += x;
  mean /= double(v.size());
  double var = 0;
  for (float x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / double(v.size()));
}

std::vector<ReferenceRecord> load_reference(const std::string& model_name) {
  const std::string path = reference_dir() + "/out/" + model_name + ".jsonl";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<ReferenceRecord> records;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    ReferenceRecord r;
    r.prompt = j.at("prompt").get<std::string>();
    r.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
    for (const auto& t : j.at("prompt_logits_top8")) r.prompt_top.push_back(parse_top(t));
    r.steps_full = j.at("steps_full").get<std::vector<std::vector<float>>>();
    for (const auto& t : j.at("steps_top")) r.steps_top.push_back(parse_top(t));
    r.greedy_ids = j.at("greedy_ids").get<std::vector<int32_t>>();
    records.push_back(std::move(r));
  }
  if (records.empty()) throw std::runtime_error(path + ": no records");
  return records;
}

std::vector<std::string> reference_model_names() {
  std::vector<std::string> names{"stories260K"};
  const std::filesystem::path dir = reference_dir() + "/models";
  if (std::filesystem::is_directory(dir)) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string f = e.path().filename().string();
      if (f.rfind("tiny-", 0) == 0 && ends_with(f, ".gguf")) names.push_back(f.substr(0, f.size() - 5));
    }
  }
  std::sort(names.begin() + 1, names.end());
  return names;
}

std::string reference_model_path(const std::string& model_name) {
  if (model_name == "stories260K") return models_dir() + "/stories260K.gguf";
  return reference_dir() + "/models/" + model_name + ".gguf";
}

double tolerance_factor(const std::string& model_name) {
  if (ends_with(model_name, "-bf16")) return 0.06;
  if (ends_with(model_name, "-q8_0") || ends_with(model_name, "-q4_0")) return 0.2;
  if (ends_with(model_name, "_k_m") || ends_with(model_name, "-q6_k")) return 0.3;
  return 0.01;  // f32, f16 and stories260K
}

}  // namespace infer::test
