// What the kernels tell a report (infer bench --json) about themselves: the CPU they run on and which
// kernel family matmul picks for a weight type, so that every published figure names both.
#pragma once
#include <string>

#include "kernels/quant/quant.h"

namespace infer::kernels {

// The CPUID brand string, trimmed ("unknown" where there is none), with the display family and model,
// which tell CPU generations apart where a virtual machine shortens the brand: "AMD EPYC (family 25,
// model 1)".
std::string cpu_model();

// Stable names of the kernel families matmul runs for a matrix of `weight` in the given layout: one
// activation row (decode) and a batch of 512 (prefill); kernel_plan.h names each kernel and row range.
// Families: "scalar", "avx2-rows", "avx2-streams", "avx2-tiles", "avx512-fma-tiles",
// "avx512-fma256-tiles", "avx512-vnni-tiles", "avx512-vnni-interleaved", "avx512-bf16-rows",
// "avx512-bf16-tiles", "amx-tiles", "amx-planes", "amx-bf16-rows", "amx-bf16-tiles". Follows the
// run-time choice (INFER_FORCE_SCALAR, INFER_NO_AVX512, INFER_NO_AMX and the 512-bit FMA probe included).
// Throws std::invalid_argument for an unsupported type.
struct KernelFamilies {
  const char* decode;
  const char* batch;
};
KernelFamilies kernel_families(TensorType weight, bool interleaved);

// How many streams the interleaved layout's decode reads side by side (decode_streams.h): 1 or 2, or 0
// while it is still timing both.
int interleaved_decode_streams();

}  // namespace infer::kernels
