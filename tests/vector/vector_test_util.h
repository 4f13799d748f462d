// Helpers the vector suites share: random vectors, hit names, FP32 blobs for INFER.VADD/VSIM.
#pragma once
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "vector/vector_set.h"

namespace infer::test {

// `dim` standard-normal components: uniformly random directions, HNSW's hardest data.
inline std::vector<float> random_vec(size_t dim, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> v(dim);
  for (auto& x : v) x = nd(rng);
  return v;
}

// The element names of search hits, in order.
inline std::vector<std::string> names(const std::vector<vector::SearchHit>& hits) {
  std::vector<std::string> out;
  for (const auto& h : hits) out.push_back(*h.name);
  return out;
}

// `v` as the little-endian float32 blob INFER.VADD / INFER.VSIM take after FP32.
inline std::string fp32(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

}  // namespace infer::test
