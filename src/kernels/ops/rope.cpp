// Rotary position embedding (spec/architectures.md §3.4). Angles are formed as llama.cpp forms them:
// theta_0 = pos, theta_{i+1} = theta_i · base^(-2/n_rot) by repeated f32 multiplication, then
// angle_i = freq_scale · theta_i / freq_factors[i], and cos/sin scaled by mscale after the f32 cos/sin
// (as ggml's rope cache does). Pairs are adjacent (normal) or half-split (NeoX).
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/ops.h"
#include "kernels/x86/avx2/ops_avx2.h"

namespace infer::kernels {

void rope_angles(int pos, const RopeParams& p, float* cos_out, float* sin_out) {
  const float step = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < p.n_rot / 2; ++i) {
    const float extrap = p.freq_factors ? theta / p.freq_factors[i] : theta;
    const float angle = p.freq_scale * extrap;
    cos_out[i] = std::cos(angle) * p.mscale;  // x · 1.0f == x: no mscale, no change in bits
    sin_out[i] = std::sin(angle) * p.mscale;
    theta *= step;
  }
}

void rope_apply_ref(float* head, const float* cos, const float* sin, const RopeParams& p) {
  const int half = p.n_rot / 2;
  for (int i = 0; i < half; ++i) {
    float* a = p.neox ? head + i : head + 2 * i;
    float* b = p.neox ? head + i + half : head + 2 * i + 1;
    const float x0 = *a, x1 = *b;
    *a = x0 * cos[i] - x1 * sin[i];
    *b = x0 * sin[i] + x1 * cos[i];
  }
}

void rope_apply(float* head, const float* cos, const float* sin, const RopeParams& p) {
  if (use_avx2()) {
    rope_apply_avx2(head, cos, sin, p);
  } else {
    rope_apply_ref(head, cos, sin, p);
  }
}

namespace {
// rope()/rope_ref() keep the angles on the stack; the forward pass uses rope_angles/rope_apply with
// its own buffers and has no such limit.
constexpr int kMaxPairs = 512;

void check_pairs(const RopeParams& p) {
  if (p.n_rot < 0 || p.n_rot / 2 > kMaxPairs) {
    throw std::invalid_argument("rope: n_rot " + std::to_string(p.n_rot) + " exceeds " + std::to_string(2 * kMaxPairs));
  }
}
}  // namespace

void rope_ref(float* head, int head_dim, int pos, const RopeParams& p) {
  (void)head_dim;  // dims >= n_rot pass through unchanged
  check_pairs(p);
  float c[kMaxPairs], s[kMaxPairs];
  rope_angles(pos, p, c, s);
  rope_apply_ref(head, c, s, p);
}

void rope(float* head, int head_dim, int pos, const RopeParams& p) {
  (void)head_dim;
  check_pairs(p);
  float c[kMaxPairs], s[kMaxPairs];
  rope_angles(pos, p, c, s);
  rope_apply(head, c, s, p);
}

}  // namespace infer::kernels
