#include "vector/projection.h"

#include <bit>
#include <cmath>
#include <cstddef>

namespace infer::vector {

namespace {
constexpr uint64_t kSeed = 0x5245445543453031ULL;  // "REDUCE01"

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

std::vector<float> make_projection(uint32_t input_dim, uint32_t dim) {
  const float mag = 1.0f / std::sqrt(static_cast<float>(dim));
  std::vector<float> m(static_cast<size_t>(dim) * input_dim);
  for (uint32_t c = 0; c < input_dim; ++c) {
    const bool flip = mix64(kSeed ^ c) & 1;  // s(c): decorrelates the pattern from the input's axes
    for (uint32_t r = 0; r < dim; ++r) {
      const bool negative = (std::popcount(r & c) & 1) != flip;
      m[static_cast<size_t>(r) * input_dim + c] = negative ? -mag : mag;
    }
  }
  return m;
}

void project(const std::vector<float>& m, uint32_t input_dim, uint32_t dim, const float* x, float* y) {
  for (uint32_t r = 0; r < dim; ++r) {
    const float* row = m.data() + static_cast<size_t>(r) * input_dim;
    double s = 0;
    for (uint32_t c = 0; c < input_dim; ++c) s += double(row[c]) * x[c];
    y[r] = static_cast<float>(s);
  }
}

}  // namespace infer::vector
