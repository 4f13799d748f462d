// SwiGLU's element-wise part (spec §3.6): out = silu(gate) · up, silu(a) = a / (1 + e^-a).
#include <cmath>

#include "kernels/runtime/cpu_features.h"
#include "kernels/ops/ops.h"
#include "kernels/x86/avx2/ops_avx2.h"

namespace infer::kernels {

void swiglu_ref(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  if (use_avx2()) {
    swiglu_avx2(gate, up, out, n);
  } else {
    swiglu_ref(gate, up, out, n);
  }
}

}  // namespace infer::kernels
