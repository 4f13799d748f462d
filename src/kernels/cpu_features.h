// Run-time CPU feature detection for kernel dispatch. INFER_FORCE_SCALAR=1 in the environment forces
// the scalar reference paths (used by tests and to measure the optimised kernels' gain).
#pragma once

namespace infer::kernels {

struct CpuFeatures { bool avx2 = false; bool fma = false; bool f16c = false; };
const CpuFeatures& cpu_features();
// AVX2 + FMA + F16C present and not disabled by INFER_FORCE_SCALAR.
bool use_avx2();

}  // namespace infer::kernels
