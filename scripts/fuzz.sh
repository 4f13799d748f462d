#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer under ASan+UBSan.
# Usage: scripts/fuzz.sh [seconds]      (default 60)
# Builds preset `fuzz` (clang), seeds a corpus with small valid files (made by gguf::Writer through
# gguf_fuzz_seeds, plus stories260K, whose first 64 KiB hold its whole header and metadata), runs for
# the given time, and keeps the grown corpus in build/fuzz/corpus/gguf. Crashes land in the cwd.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
models=${INFER_MODELS_DIR:-$(realpath -m ../shared/models)}

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target gguf_fuzz gguf_fuzz_seeds

corpus=build/fuzz/corpus/gguf
seeds=build/fuzz/seeds/gguf
mkdir -p "$corpus" "$seeds"
build/fuzz/fuzz/gguf_fuzz_seeds "$seeds"
[ -f "$models/stories260K.gguf" ] && cp -f "$models/stories260K.gguf" "$seeds/"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
build/fuzz/fuzz/gguf_fuzz "$corpus" "$seeds" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1
