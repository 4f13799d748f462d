#!/usr/bin/env bash
# Checks the CPU kernels on an Intel Xeon with AMX (issue 21's items that need one; it runs on any
# x86-64 machine, where the AMX tests skip): the kernel and model suites on this CPU (the AMX-INT8
# Q8_0/Q4_0 and AMX-BF16 hardware tests, fidelity to the reference outputs, invariant 7), small batches
# with AMX against the AVX-512 VNNI kernels (bench_kernels BM_MatmulBatch, INFER_NO_AMX=1), and the
# per-type table (scripts/type_bench.sh) with AMX and without. Prints a summary last.
#
# Usage: scripts/amx_check.sh [BUILD_DIR]     (default build/release, with bench/bench_kernels built)
# Environment: INFER_MODELS_DIR, INFER_REFERENCE_DIR, INFER_VECTORS_DIR as for the tests (default
# ../shared/...); AMX_CHECK_OUT (default BUILD_DIR/amx_check) for the logs and the synthetic models;
# RUN (default "taskset -c 2,3" where taskset exists and there are 4 cores or more: two cores, as the
# other machines have); TYPES (default "q4_k_m q8_0 q4_0 f16 bf16 q5_k_m"); ROUNDS (default 2);
# LLAMA_BENCH as for type_bench.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
source scripts/shared_dirs.sh
export INFER_BUILD_DIR=$build
out=${AMX_CHECK_OUT:-$build/amx_check}
mkdir -p "$out"
if [ -z "${RUN+x}" ]; then
  RUN=""
  command -v taskset > /dev/null && [ "$(nproc)" -ge 4 ] && RUN="taskset -c 2,3"
fi
export RUN
types=${TYPES:-q4_k_m q8_0 q4_0 f16 bf16 q5_k_m}
summary=()

echo "== CPU"
grep -m1 'model name' /proc/cpuinfo
flags=$(grep -o -E 'amx[a-z_0-9]*|avx512_fp16|avx512_bf16|avx512_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "flags: $flags"
summary+=("flags: $flags")

for suite in kernels model; do
  echo "== $suite suite (without the CUDA tests)"
  "$build/tests/$suite/infer_${suite}_tests" --gtest_filter='-*Cuda*' --gtest_brief=1 > "$out/$suite.log" 2>&1
  rc=$?
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/$suite.log"
  summary+=("$suite suite: rc $rc, $(grep -E '^\[  PASSED' "$out/$suite.log" | head -1 | sed 's/\[ *PASSED *\] *//')")
done
grep -E "AmxInt8Q8_0Q4_0.Hardware|AmxBf16.Hardware" "$out/kernels.log" | head -4

echo "== small batches (1024 x 151,936, 2 threads): AMX, then INFER_NO_AMX=1 (AVX-512 VNNI)"
filter='BM_MatmulBatch/(8|2|12|14|30)/(1|4|8|12|16)/2/'
for no_amx in 0 1; do
  INFER_NO_AMX=$no_amx $RUN "$build/bench/bench_kernels" --benchmark_filter="$filter" --benchmark_min_time=0.3 \
    2>/dev/null | grep -E "^BM_" | awk -v n="$no_amx" '{ print "INFER_NO_AMX=" n, $1, $2, $3, $NF }' |
    tee -a "$out/batches.log"
done

echo "== per-type table with AMX"
BENCH_DIR="$out/models" TYPES="$types" ROUNDS=${ROUNDS:-2} bash scripts/type_bench.sh | tee "$out/types_amx.md"
echo "== per-type table with INFER_NO_AMX=1"
INFER_NO_AMX=1 BENCH_DIR="$out/models" TYPES="$types" ROUNDS=${ROUNDS:-2} bash scripts/type_bench.sh |
  tee "$out/types_no_amx.md"

echo "== summary"
printf '%s\n' "${summary[@]}"
