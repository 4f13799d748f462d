#!/usr/bin/env bash
# Sanitizer sweeps: the test suites under AddressSanitizer+UBSan (preset asan) and ThreadSanitizer
# (preset tsan), plus a libFuzzer run of the GGUF parser.
# Usage: scripts/sanitize.sh [short|full]
#   short (CI): ASan on the gguf, tokenizer, grammar, chat, engine, redis and vector suites, TSan on
#               the suites that start threads (engine, redis, vector), less the long randomised sweeps
#               in `short_skip` and `tsan_short_skip` (release ctest runs them, and full mode under both
#               sanitizers), the
#               command fuzzer for 20,000 commands or 1 min, whichever comes first, the RESTORE fuzzer
#               for 60,000 payloads or 1 min, 30 s of GGUF fuzzing.
#   full:       ASan on every suite but cli, TSan on the kernels, model, grammar, chat, engine, redis
#               and vector suites, the command fuzzer for 10 min, the RESTORE fuzzer for 10 min, 10 min of GGUF
#               fuzzing.
# The suites that start redis-server load the sanitizer-built module into Debian's uninstrumented
# server with the sanitizer's runtime preloaded (tests/redis/CMakeLists.txt), so the module's
# threads run under ASan and TSan too. The instrumented presets build at -O1 -g1 (CMakePresets.json
# `instrumented`): line-level stack traces at about half the compile time of -O2 -g.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-short}
source scripts/shared_dirs.sh
scripts/setup.sh >/dev/null  # packages only matter here; the release build is cheap when up to date

# Randomised sweeps that take 30-130 s each under ASan (the same code paths run in shorter tests).
short_skip=JsonSchemaWalks.RandomTokenTextsOfEverySchemaValidate:SchemaGeneration.ByteLevelBpe151k*
short_skip+=:HnswRemoval.EveryNodeStaysReachableAtEveryMIn*
# Under TSan also the main-thread budget suite (megabyte arguments, 3-4 min under TSan; ASan runs it)
# and a startup-refusal test.
tsan_short_skip=$short_skip:MainThreadBudget.*:OperatorSafety.StartupModelThatDoesNotFitMemory*
asan_filter=""; tsan_filter=""
case "$mode" in
  short) asan_suites=(gguf tokenizer grammar chat engine redis vector); tsan_suites=(engine redis vector); fuzz_seconds=30
         asan_filter="--gtest_filter=-$short_skip"; tsan_filter="--gtest_filter=-$tsan_short_skip"
         command_fuzz=(--commands 20000 --minutes 1); restore_fuzz=(--payloads 60000 --minutes 1) ;;
  full)  asan_suites=(gguf tokenizer kernels model grammar chat engine redis vector); tsan_suites=(kernels model grammar chat engine redis vector)
         fuzz_seconds=600; command_fuzz=(--minutes 10); restore_fuzz=(--minutes 10) ;;
  *) echo "usage: $0 [short|full]" >&2; exit 2 ;;
esac

run_suites() {  # preset gtest-filter suite...
  local preset=$1 gtest_filter=$2; shift 2
  cmake --preset "$preset" >/dev/null
  local targets=(); for s in "$@"; do targets+=("infer_${s}_tests"); done
  echo "sanitize: building ${targets[*]} with preset $preset"
  cmake --build --preset "$preset" --target "${targets[@]}"
  for s in "$@"; do
    echo "sanitize: $preset infer_${s}_tests"
    INFER_BUILD_DIR=$(realpath "build/$preset") "build/$preset/tests/$s/infer_${s}_tests" --gtest_brief=1 $gtest_filter
  done
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_suites asan "$asan_filter" "${asan_suites[@]}"
# Random and malformed INFER.* commands and disconnects against the ASan-built module; it prints its
# seed, which `--seed` replays (scripts/fuzz_commands.sh runs it for longer).
cmake --build --preset asan --target infer_command_fuzzer
INFER_BUILD_DIR=$(realpath build/asan) build/asan/tests/redis/infer_command_fuzzer "${command_fuzz[@]}"
# Mutated and truncated DUMP payloads of vector sets through RESTORE (scripts/fuzz_restore.sh runs it
# for longer).
cmake --build --preset asan --target infer_restore_fuzzer
INFER_BUILD_DIR=$(realpath build/asan) build/asan/tests/redis/infer_restore_fuzzer "${restore_fuzz[@]}"
unset ASAN_OPTIONS
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
run_suites tsan "$tsan_filter" "${tsan_suites[@]}"
unset TSAN_OPTIONS
scripts/fuzz.sh "$fuzz_seconds"
