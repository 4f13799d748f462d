// Shared helpers of the kernels tests: random rows, quantised weight matrices, and the scale of a dot
// product's rounding error.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/quant/quant.h"

namespace infer::kernels::test {

inline constexpr TensorType kWeightTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16,
                                              TensorType::Q8_0, TensorType::Q4_0, TensorType::Q5_0,
                                              TensorType::Q5_1, TensorType::Q4_K, TensorType::Q5_K,
                                              TensorType::Q6_K};

// Gaussian values with a few outliers, like real weights and activations.
inline std::vector<float> random_floats(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  for (int64_t i = 0; i < n; i += 97) v[i] *= 6;
  return v;
}

// `rows` rows of `n` elements quantised to `t` with the reference writer.
inline std::vector<uint8_t> random_weights(TensorType t, int64_t rows, int64_t n, uint32_t seed) {
  const std::vector<float> x = random_floats(rows * n, seed, 0.05f);
  const uint64_t rb = quant_row_bytes(t, n);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, x.data() + r * n, w.data() + r * rb, n);
  return w;
}

// Σ |w_i · x_i| over the dequantised rows (weights of type t, activations in activation_type(t)): the
// scale of a dot product's rounding error.
inline double dot_magnitude(TensorType t, const void* w, const void* act, int64_t n) {
  std::vector<float> wd(n), ad(n);
  dequantize_row(t, w, wd.data(), n);
  dequantize_row(activation_type(t), act, ad.data(), n);
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m += std::fabs(static_cast<double>(wd[i]) * ad[i]);
  return m;
}

inline const char* type_label(TensorType t) {
  switch (t) {
    case TensorType::F32: return "F32";
    case TensorType::F16: return "F16";
    case TensorType::BF16: return "BF16";
    case TensorType::Q8_0: return "Q8_0";
    case TensorType::Q4_0: return "Q4_0";
    case TensorType::Q5_0: return "Q5_0";
    case TensorType::Q5_1: return "Q5_1";
    case TensorType::Q4_K: return "Q4_K";
    case TensorType::Q5_K: return "Q5_K";
    case TensorType::Q6_K: return "Q6_K";
    case TensorType::Q8_K: return "Q8_K";
    default: return "other";
  }
}

}  // namespace infer::kernels::test
