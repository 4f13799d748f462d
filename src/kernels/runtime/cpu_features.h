// Run-time CPU feature detection for kernel dispatch. INFER_FORCE_SCALAR=1 in the environment forces
// the scalar reference paths (used by tests and to measure the optimised kernels' gain).
#pragma once

namespace infer::kernels {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512 = false;    // AVX-512 F, BW, VL and VNNI, with the OS saving the ZMM state
  bool avx512_bf16 = false;  // AVX-512 BF16 (VDPBF16PS)
  bool amx_int8 = false;  // AMX-TILE and AMX-INT8, with the OS supporting the tile state (XCR0)
  bool amx_bf16 = false;  // AMX-BF16 (TDPBF16PS), with amx_int8
};
const CpuFeatures& cpu_features();
// AVX2 + FMA + F16C present and not disabled by INFER_FORCE_SCALAR.
bool use_avx2();
// The AVX-512 kernels (attention, and the interleaved weight layout's VNNI kernels): use_avx2() and
// AVX-512 F/BW/VL/VNNI present, INFER_NO_AVX512 not set to 1.
bool use_avx512();
// The AVX-512 BF16 kernels of BF16 weights: use_avx512() and AVX-512 BF16 present (AMD Zen 4/5, Intel
// Sapphire Rapids and later).
bool use_avx512_bf16();
// The 512-bit FMA tile of F32/F16/BF16 weights (avx512::dot_tile_fma_*): use_avx512() and a probe,
// run once, finds 512-bit FMAs as fast as 256-bit ones (below kFullWidthFmaRatio of their time).
// The tile gives the AVX2 tile's values bit for bit, so the probe changes speed, never an output.
bool use_avx512_fma_tiles();
inline constexpr double kFullWidthFmaRatio = 1.5;
// The AMX tile kernels for batches of rows: use_avx2(), AVX-512 and AMX-INT8 present, INFER_NO_AMX not
// set to 1, and Linux granted the process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once
// here). Never asked under a seccomp filter: a filter may kill the process on arch_prctl.
bool use_amx();
// The AMX-BF16 kernels of BF16 weights: use_amx(), use_avx512_bf16() and AMX-BF16 present
// (Intel Sapphire Rapids and later).
bool use_amx_bf16();

}  // namespace infer::kernels
