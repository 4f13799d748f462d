// The fidelity oracle in ../shared/reference (see its README): per model, one record per prompt with
// the reference engine's prompt ids, top logits at every prompt position and generation step, the full
// logits of steps 0 and 1, and the greedy continuation.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace infer::test {

using TopLogits = std::vector<std::pair<int32_t, float>>;  // (token id, logit), largest first

struct ReferenceRecord {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<TopLogits> prompt_top;  // [prompt position] → top 8 predicting the next position
  std::vector<std::vector<float>> steps_full;  // full logits at steps 0 and 1
  std::vector<TopLogits> steps_top;   // [step] → top 16
  std::vector<int32_t> greedy_ids;

  // Standard deviation of steps_full[0]: the unit of the README's tolerances.
  double sigma() const;
};

// Reads reference_dir()/out/<model>.jsonl; throws std::runtime_error when missing or malformed.
std::vector<ReferenceRecord> load_reference(const std::string& model_name);

// Models the fidelity tests cover, by name: "stories260K" and the tiny-* files of the architectures
// the engine runs.
std::vector<std::string> reference_model_names();
// Path of a reference model's GGUF (stories260K lives in models_dir()).
std::string reference_model_path(const std::string& model_name);
// A model name as a test parameter's name: every character that is not a letter or digit becomes '_'.
std::string param_name(const ::testing::TestParamInfo<std::string>& info);

// The README's tolerance factor k for a model, from the weight type in its name (f32 → 0.01 ...).
double tolerance_factor(const std::string& model_name);

}  // namespace infer::test
