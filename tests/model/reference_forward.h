// A scalar reference forward pass for one sequence, written straight from spec/architectures.md §3–§4
// and architectures-more.md (gemma3, phi3, qwen3moe; bert has its own embedding tests):
// every weight dequantised to F32 once, activations and accumulations in double, no paging, no KV
// rounding, no activation quantisation. The yardstick that model::Forward is checked against.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace infer::test {

class ReferenceForward {
 public:
  explicit ReferenceForward(const model::Model& m);

  // Logits (n_vocab each) after every token of `tokens`, fed at positions 0, 1, ...
  std::vector<std::vector<float>> run(const std::vector<int32_t>& tokens) const;

 private:
  struct Matrix {
    int64_t n_in = 0, n_out = 0;
    std::vector<float> w;  // n_out rows of n_in
  };
  struct Layer {
    std::vector<float> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm, post_attn_norm, post_ffn_norm;
    Matrix wq, wk, wv, wo, gate, up, down;
    Matrix router;
    std::vector<Matrix> gate_exps, up_exps, down_exps;  // qwen3moe, one per expert
  };
  static Matrix dequantize(const kernels::WeightMatrix& w);
  static std::vector<double> matvec(const Matrix& m, const std::vector<double>& x);

  const model::HParams hp_;
  Matrix token_embd_, output_;
  std::vector<float> output_norm_, output_bias_, rope_factors_;  // rope_factors_: Model::rope_factors()
  std::vector<Layer> layers_;
};

}  // namespace infer::test
