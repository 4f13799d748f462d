// GELU as llama.cpp's CPU backend computes it (spec/architectures-more.md §0.3): the tanh approximation
// evaluated in f32 once per f16 value into a table, looked up with the input rounded to f16; the
// reference outputs were made this way, and an exact GELU would drift by up to 2e-3 σ.
#include <array>
#include <cmath>

#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/ops.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/quant/quant.h"

namespace infer::kernels {
namespace {

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

// One entry past the 65,536: the AVX2 lookup reads 32 bits at the last one.
const std::array<uint16_t, 65537>& gelu_table() {
  static const auto table = [] {
    std::array<uint16_t, 65537> t{};
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f32_to_f16(gelu_tanh(f16_to_f32(uint16_t(h))));
    return t;
  }();
  return table;
}

inline float gelu_one(float x, const std::array<uint16_t, 65537>& table) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return f16_to_f32(table[f32_to_f16(x)]);
}

}  // namespace

uint16_t gelu_table_entry(uint16_t h) { return gelu_table()[h]; }

void gelu_ref(const float* x, float* out, int64_t n) {
  const auto& table = gelu_table();
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_one(x[i], table);
}

void geglu_ref(const float* gate, const float* up, float* out, int64_t n) {
  const auto& table = gelu_table();
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_one(gate[i], table) * up[i];
}

void gelu(const float* x, float* out, int64_t n) {
  if (use_avx2()) {
    gelu_avx2(gelu_table().data(), x, out, n);
  } else {
    gelu_ref(x, out, n);
  }
}

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  if (use_avx2()) {
    geglu_avx2(gelu_table().data(), gate, up, out, n);
  } else {
    geglu_ref(gate, up, out, n);
  }
}

}  // namespace infer::kernels
