// Which kernel multiplies a chunk of a matmul: (weight type, layout, activation rows, this CPU's
// features) to one named kernel. Every row threshold is in batch_rows.h and this is the one function
// that chooses by them: matmul.cpp runs what it returns, `infer bench` prints it (describe_plans), and
// INFER_LOG_KERNELS=1 logs it when a model loads.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/matmul/row_kernels.h"

namespace infer::kernels {

// How the chosen kernel is called over a chunk's weight rows and activation rows.
enum class KernelCall : uint8_t {
  kRowsByFour,     // `rows` for each weight row, at most kMaxRows activation rows a call
  kOutputsPerRow,  // `outputs` over all the weight rows, once per activation row
  kTile,           // `tile` over all the weight rows and all the activation rows at once
};

struct KernelPlan {
  KernelCall call;
  DotRowsFn rows = nullptr;
  DotOutputsFn outputs = nullptr;
  DotTileFn tile = nullptr;
};

// The plan for `rows` activation rows (≥ 1) of weights of `weight` on this CPU. For the interleaved
// layout, the plan of its whole groups of 16 weight rows (a matrix's rows past its last whole group
// take the row layout's plan), or the row layout's where the CPU has no interleaved kernels. Throws
// std::invalid_argument for a type matmul does not multiply.
KernelPlan plan_matmul(TensorType weight, bool interleaved, int64_t rows);
// The same from the type's kernels as row_kernels(weight) gives them (matmul's hot path).
KernelPlan plan_matmul(const RowKernels& k, TensorType weight, bool interleaved, int64_t rows);

// The kernel a plan runs: its function ("avx512::dot_rows_interleaved_q8_0"), its family (the stable
// names of kernel_report.h: "avx512-vnni-interleaved") and the file under src/kernels that holds it.
struct KernelName {
  std::string function;
  const char* family;
  const char* file;
};
KernelName kernel_name(TensorType weight, const KernelPlan& plan);

// The plans of 1 to 1,024 rows as ranges: "1 row: avx512::dot_outputs_interleaved_q8_0
// (x86/avx512/q8_0_q4_0_interleaved_avx512.cpp); 2-32 rows: ...; 33+ rows: ...".
std::string describe_plans(TensorType weight, bool interleaved);

}  // namespace infer::kernels
