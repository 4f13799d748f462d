// Block geometry of the ggml tensor types (spec/quant-formats.md §2), indexed by type id.
#include "gguf/tensor_type.h"

#include <array>
#include <stdexcept>
#include <string>

namespace infer::gguf {
namespace {

constexpr uint32_t kTypeCount = 43;  // GGML_TYPE_COUNT at the spec's commit; ids >= 43 are rejected

// block_elements == 0 marks an id that is removed or never assigned.
constexpr std::array<TypeTraits, kTypeCount> kTraits = {{
    {"F32", 1, 4},        {"F16", 1, 2},       {"Q4_0", 32, 18},    {"Q4_1", 32, 20},
    {"", 0, 0},           {"", 0, 0},          {"Q5_0", 32, 22},    {"Q5_1", 32, 24},
    {"Q8_0", 32, 34},     {"Q8_1", 32, 36},    {"Q2_K", 256, 84},   {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},   {"Q5_K", 256, 176},  {"Q6_K", 256, 210},  {"Q8_K", 256, 292},
    {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},   {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},  {"IQ4_XS", 256, 136},
    {"I8", 1, 1},         {"I16", 1, 2},       {"I32", 1, 4},       {"I64", 1, 8},
    {"F64", 1, 8},        {"IQ1_M", 256, 56},  {"BF16", 1, 2},      {"", 0, 0},
    {"", 0, 0},           {"", 0, 0},          {"TQ1_0", 256, 54},  {"TQ2_0", 256, 66},
    {"", 0, 0},           {"", 0, 0},          {"", 0, 0},          {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},    {"Q1_0", 128, 18},   {"Q2_0", 64, 18},
}};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t type_id) {
  if (type_id >= kTypeCount || kTraits[type_id].block_elements == 0) return std::nullopt;
  return kTraits[type_id];
}

std::string_view type_name(TensorType type) {
  auto id = static_cast<uint32_t>(type);
  if (auto t = type_traits(id)) return t->name;
  // Names for unknown ids live in a table built once, so the views stay valid forever.
  static const std::array<std::string, 256> unknown = [] {
    std::array<std::string, 256> names;
    for (size_t i = 0; i < names.size(); ++i) names[i] = "type" + std::to_string(i);
    return names;
  }();
  return id < unknown.size() ? std::string_view(unknown[id]) : std::string_view("type?");
}

uint64_t row_bytes(TensorType type, uint64_t n_elements) {
  auto t = type_traits(static_cast<uint32_t>(type));
  if (!t) throw std::invalid_argument("row_bytes: unknown tensor type " + std::string(type_name(type)));
  if (n_elements % t->block_elements != 0) {
    throw std::invalid_argument("row_bytes: " + std::to_string(n_elements) + " elements is not a multiple of the " +
                                std::string(t->name) + " block size " + std::to_string(t->block_elements));
  }
  return n_elements / t->block_elements * t->block_bytes;
}

}  // namespace infer::gguf
