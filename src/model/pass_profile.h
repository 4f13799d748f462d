// Where a forward pass's time goes, by phase (Forward::run adds to one when given it). The per-layer
// phases are summed over the layers. Every phase runs on the whole compute pool, so these are the
// calling thread's wall-clock seconds, not CPU time. Plain data: front ends read it through the engine.
#pragma once

namespace infer::model {

struct PassProfile {
  double qkv_s = 0;         // attention RMSNorm, then the q, k, v matmuls (and their biases)
  double attention_s = 0;   // q/k norms, RoPE and K/V store per row, then attention over the pages
  double output_s = 0;      // attention output matmul and residual add
  double ffn_up_s = 0;      // FFN RMSNorm, then the gate and up matmuls
  double ffn_down_s = 0;    // SwiGLU, then the down matmul and residual add
  double classifier_s = 0;  // final RMSNorm and the logits matmul
  double other_s = 0;       // the rest: checks, token embedding, RoPE angles
  // Bytes of keys and values the attention read from the KV pages (each block of rows reads the keys
  // its rows span once): over attention_s, the phase's read rate (infer serve-bench --profile).
  double attention_bytes = 0;

  double total_s() const { return qkv_s + attention_s + output_s + ffn_up_s + ffn_down_s + classifier_s + other_s; }
  // Adds weight × each phase (and the bytes) of `o` (weight −1: what a later total added since an earlier one).
  void accumulate(const PassProfile& o, double weight = 1) {
    qkv_s += weight * o.qkv_s;
    attention_s += weight * o.attention_s;
    output_s += weight * o.output_s;
    ffn_up_s += weight * o.ffn_up_s;
    ffn_down_s += weight * o.ffn_down_s;
    classifier_s += weight * o.classifier_s;
    other_s += weight * o.other_s;
    attention_bytes += weight * o.attention_bytes;
  }
};

}  // namespace infer::model
