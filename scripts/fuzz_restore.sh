#!/usr/bin/env bash
# Runs the RESTORE fuzzer (tests/redis/restore_fuzzer.cpp: mutated and truncated DUMP payloads of vector
# sets, CRC recomputed, DEBUG RELOAD after each accepted one) against the ASan+UBSan-built module in
# Debian's redis-server (the sanitizer runtime is preloaded into it, tests/redis/CMakeLists.txt).
# Usage: scripts/fuzz_restore.sh [MINUTES] [fuzzer options...]   (default 10 minutes, a random seed)
#   e.g. scripts/fuzz_restore.sh 30 --seed 42     scripts/fuzz_restore.sh 0 --payloads 200000
# On a crash or hang it prints the seed, the payload number (`--seed N --payloads K` replays up to it),
# the payload (also written to a file) and the server log tail, and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
shift || true

cmake --preset asan >/dev/null
cmake --build --preset asan --target redis_infer infer_restore_fuzzer

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
INFER_BUILD_DIR=$(realpath build/asan) build/asan/tests/redis/infer_restore_fuzzer --minutes "$minutes" "$@"
