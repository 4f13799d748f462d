#!/usr/bin/env bash
# Runs the grammar-aware command fuzzer (tests/redis/command_fuzzer.cpp) against the ASan+UBSan-built
# module in Debian's redis-server (the sanitizer runtime is preloaded into it, tests/redis/CMakeLists.txt).
# Usage: scripts/fuzz_commands.sh [MINUTES] [fuzzer options...]   (default 10 minutes, a random seed)
#   e.g. scripts/fuzz_commands.sh 60 --seed 42 --clients 8
# On a crash or hang it prints the seed, the last commands sent and the server log tail, and exits 1;
# `--seed N` replays the same command sequences.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
shift || true
export INFER_MODELS_DIR=${INFER_MODELS_DIR:-$(realpath -m ../shared/models)}

cmake --preset asan >/dev/null
cmake --build --preset asan --target redis_infer infer_command_fuzzer

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
INFER_BUILD_DIR=$(realpath build/asan) build/asan/tests/redis/infer_command_fuzzer --minutes "$minutes" "$@"
