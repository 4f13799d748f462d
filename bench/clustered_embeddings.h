// A synthetic dataset with the structure of real text embeddings, for bench_vector and
// scripts/vector_bench.sh: uniformly random vectors are HNSW's worst case and unlike any embedding model's
// output. Each vector is drawn as
//   cluster k (of `clusters`, Zipf-like weights 1/(k+10)^0.8: a few big topics, many small ones)
//   z = centre_k + spread_k · L_k (r ⊙ u)          latent point, `latent` dims; u ~ N(0, I); r_j = (j+1)^-0.5;
//                                                   L_k a random d×d matrix per cluster (anisotropic clusters)
//   x = A z + B sin(C z + φ) + offset + noise      a curved `latent`-dim manifold in `dim` dims (random
//                                                   Fourier features), a shared direction (all cosines lean
//                                                   positive, as embedding models' do) and ambient noise
//                                                   whose scale falls off as (i+1)^-0.5 over the dimensions
//   v = x / |x|
// With the defaults (384-d, 24 latent dims, 3,000 clusters) and 100,000 vectors: random pairs have cosine
// 0.25 ± 0.11; a query's nearest neighbour 0.74, its 10th 0.67, its 100th 0.59; local intrinsic dimension
// (MLE over 10 neighbours) about 12; mean distance over nearest distance 2.9. Seeded and deterministic for
// one build (std::mt19937_64 and libstdc++'s normal distribution). Queries come from the same distribution
// through another generator, never from the data.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace infer::bench {

class ClusteredEmbeddings {
 public:
  struct Params {
    size_t dim = 384;
    size_t latent = 24;
    size_t clusters = 3000;
    size_t features = 64;         // sin terms bending the manifold
    float cluster_spread = 1.0f;  // latent scale of a cluster, against centres drawn from N(0, I)
    float noise = 6.0f;           // norm of the ambient noise (the manifold's part is about 7)
    float offset = 4.0f;          // norm of the direction every vector shares
    uint64_t seed = 42;
  };

  explicit ClusteredEmbeddings(const Params& p) : p_(p) {
    std::mt19937_64 rng(p.seed);
    std::normal_distribution<float> nd;
    const size_t D = p.dim, d = p.latent, H = p.features, K = p.clusters;
    auto fill = [&](std::vector<float>& v, size_t n, float scale) {
      v.resize(n);
      for (auto& x : v) x = nd(rng) * scale;
    };
    fill(a_, D * d, 1.0f / std::sqrt(float(D)));
    fill(b_, D * H, 1.0f / std::sqrt(float(D)));
    fill(c_, H * d, 1.0f / std::sqrt(float(d)));
    std::uniform_real_distribution<float> angle(0.0f, 2.0f * float(M_PI));
    phase_.resize(H);
    for (auto& x : phase_) x = angle(rng);
    fill(offset_, D, 1.0f);
    float norm = 0;
    for (float x : offset_) norm += x * x;
    for (auto& x : offset_) x *= p.offset / std::sqrt(norm);
    fill(centres_, K * d, 1.0f);
    fill(shapes_, K * d * d, 1.0f / std::sqrt(float(d)));
    std::normal_distribution<float> log_spread(0.0f, 0.4f);
    spread_.resize(K);
    for (auto& s : spread_) s = p.cluster_spread * std::exp(log_spread(rng));
    std::vector<double> weights(K);
    for (size_t k = 0; k < K; ++k) weights[k] = 1.0 / std::pow(double(k) + 10.0, 0.8);
    pick_ = std::discrete_distribution<size_t>(weights.begin(), weights.end());
    // Noise scales (i+1)^-0.5, normalised so that the noise vector's expected norm is `noise`.
    noise_scale_.resize(D);
    double sum = 0;
    for (size_t i = 0; i < D; ++i) sum += 1.0 / double(i + 1);
    for (size_t i = 0; i < D; ++i) noise_scale_[i] = p.noise * float(std::sqrt(1.0 / double(i + 1) / sum));
  }

  size_t dim() const { return p_.dim; }

  // One unit vector of dim() floats, written to `out`.
  void sample(std::mt19937_64& rng, float* out) const {
    std::normal_distribution<float> nd;
    const size_t D = p_.dim, d = p_.latent, H = p_.features;
    const size_t k = pick_(rng);
    std::vector<float> u(d), z(d), s(H);
    for (size_t j = 0; j < d; ++j) u[j] = nd(rng) / std::sqrt(float(j + 1));
    const float* shape = &shapes_[k * d * d];
    for (size_t i = 0; i < d; ++i) {
      float acc = 0;
      for (size_t j = 0; j < d; ++j) acc += shape[i * d + j] * u[j];
      z[i] = centres_[k * d + i] + spread_[k] * acc;
    }
    for (size_t h = 0; h < H; ++h) {
      float acc = phase_[h];
      for (size_t j = 0; j < d; ++j) acc += c_[h * d + j] * z[j];
      s[h] = std::sin(acc);
    }
    double norm = 0;
    for (size_t i = 0; i < D; ++i) {
      float x = offset_[i] + noise_scale_[i] * nd(rng);
      for (size_t j = 0; j < d; ++j) x += a_[i * d + j] * z[j];
      for (size_t h = 0; h < H; ++h) x += b_[i * H + h] * s[h];
      out[i] = x;
      norm += double(x) * x;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (size_t i = 0; i < D; ++i) out[i] *= inv;
  }

  // `n` vectors, row after row, from a generator seeded with `stream` (data and queries use different ones).
  std::vector<float> draw(size_t n, uint64_t stream) const {
    std::mt19937_64 rng(p_.seed * 1000003 + stream);
    std::vector<float> out(n * p_.dim);
    for (size_t i = 0; i < n; ++i) sample(rng, &out[i * p_.dim]);
    return out;
  }

 private:
  Params p_;
  std::vector<float> a_, b_, c_, phase_, offset_, centres_, shapes_, spread_, noise_scale_;
  mutable std::discrete_distribution<size_t> pick_;  // operator() is non-const; its state is its weights only
};

}  // namespace infer::bench
