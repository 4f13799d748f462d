// The constants of the vectorised expf (vec_exp_avx2.h, softmax_avx512.cpp): both versions must take
// the same steps with the same values to give the same bits.
#pragma once

namespace infer::kernels::exp_constants {

inline constexpr float kLowest = -87.3f;  // inputs clamped to [kLowest, kHighest]
inline constexpr float kHighest = 88.7f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;  // ln 2 as a short part (n·kLn2Hi is exact) and the rest
inline constexpr float kLn2Lo = -2.12194440e-4f;
// e^r ≈ 1 + r + r²·(p5 + r·(p4 + r·(p3 + r·(p2 + r·(p1 + r·p0))))) on |r| <= ln2/2
inline constexpr float kP0 = 1.9875691500e-4f;
inline constexpr float kP1 = 1.3981999507e-3f;
inline constexpr float kP2 = 8.3334519073e-3f;
inline constexpr float kP3 = 4.1665795894e-2f;
inline constexpr float kP4 = 1.6666665459e-1f;
inline constexpr float kP5 = 5.0000001201e-1f;

}  // namespace infer::kernels::exp_constants
