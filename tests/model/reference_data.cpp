// Loader for the reference outputs (reference_data.h).
#include "reference_data.h"

#include <cctype>

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
  // By name: a model added to reference/ is not covered until it is listed here (the tiny-bert
  // embedders have their own format and test).
  return {"stories260K",         "tiny-llama-bf16",      "tiny-llama-f16",      "tiny-llama-f32",
          "tiny-llama-q4_0",     "tiny-llama-q4_k_m",    "tiny-llama-q5_k_m",   "tiny-llama-q6_k",
          "tiny-llama-q8_0",     "tiny-qwen2-f16",       "tiny-qwen2-q4_k_m",   "tiny-qwen2-q8_0",
          "tiny-qwen3-f32",      "tiny-qwen3-q4_k_m",    "tiny-qwen3-q8_0",     "tiny-gemma3-f32",
          "tiny-gemma3-q4_k_m",  "tiny-gemma3-q8_0",     "tiny-phi3-f32",       "tiny-phi3-q4_k_m",
          "tiny-phi3-q8_0",      "tiny-qwen3moe-f32",    "tiny-qwen3moe-q4_k_m", "tiny-qwen3moe-q8_0"};
}

std::string reference_model_path(const std::string& model_name) {
  if (model_name == "stories260K") return models_dir() + "/stories260K.gguf";
  return reference_dir() + "/models/" + model_name + ".gguf";
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

double tolerance_factor(const std::string& model_name) {
  if (ends_with(model_name, "-bf16")) return 0.06;
  if (ends_with(model_name, "-q8_0") || ends_with(model_name, "-q4_0")) return 0.2;
  if (ends_with(model_name, "_k_m") || ends_with(model_name, "-q6_k")) return 0.3;
  return 0.01;  // f32, f16 and stories260K
}

}  // namespace infer::test
