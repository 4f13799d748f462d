#!/usr/bin/env bash
# The serving engine's throughput check: 8 concurrent sequences against one, on the synthetic
# qwen3-0.6b Q4_K_M (made with `infer synth` when missing; random weights of the real shapes, about
# 373 MiB). Probes the memory bandwidth before and after (the host's memory speed moves one
# sequence's rate), then runs `infer serve-bench` with the levels alternating over several repeats:
# its "vs first" column is each level's median ratio to the first level's decode tok/s measured in
# the same repeat.
# Usage: scripts/serve_bench.sh [more serve-bench options, e.g. --profile or --json]
#   env: BUILD_DIR (build/release), MODEL (default $BENCH_DIR/qwen3-0.6b-q4_k_m.gguf, made if missing),
#        BENCH_DIR (build/bench-models), CONCURRENCY (1,8), PROMPT (64), GEN (48), ROUNDS (2),
#        REPEATS (3), THREADS (0 = all cores), KV (the KV cache type: f16, q8_0 or q4_0; default f16),
#        LLAMA_BATCHED_BENCH (path to llama.cpp's llama-batched-bench, built beside the project: run on
#        the same file, prompt, generation, levels, threads and KV type after ours; llama.cpp builds
#        older than April 2025 read no qwen3, so give them MODEL=a file made with
#        `infer synth --arch llama --like qwen3-0.6b --type q4_k_m`)
#   SHORT=1: one quick pass without the probe (CI's smoke run): levels 1,2, prompts of 16, 8 tokens.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release}
BENCH_DIR=${BENCH_DIR:-build/bench-models}
MODEL=${MODEL:-$BENCH_DIR/qwen3-0.6b-q4_k_m.gguf}
THREADS=${THREADS:-0}
KV=${KV:-f16}
if [ "${SHORT:-0}" = 1 ]; then
  CONCURRENCY=${CONCURRENCY:-1,2} PROMPT=${PROMPT:-16} GEN=${GEN:-8} ROUNDS=${ROUNDS:-1} REPEATS=${REPEATS:-1}
else
  CONCURRENCY=${CONCURRENCY:-1,8} PROMPT=${PROMPT:-64} GEN=${GEN:-48} ROUNDS=${ROUNDS:-2} REPEATS=${REPEATS:-3}
fi
infer="$BUILD_DIR/src/cli/infer"
probe="$BUILD_DIR/bench/bench_kernels"
[ -x "$infer" ] || { echo "serve_bench: $infer not built (bash scripts/setup.sh)" >&2; exit 1; }
if [ -n "${LLAMA_BATCHED_BENCH:-}" ] && [ ! -x "$LLAMA_BATCHED_BENCH" ]; then
  echo "serve_bench: LLAMA_BATCHED_BENCH=$LLAMA_BATCHED_BENCH is not an executable" >&2
  exit 1
fi

if [ ! -f "$MODEL" ]; then
  echo "serve_bench: making $MODEL (infer synth, about 373 MiB)" >&2
  mkdir -p "$(dirname "$MODEL")"
  "$infer" synth --like qwen3-0.6b --type q4_k_m -t "$([ "$THREADS" -gt 0 ] && echo "$THREADS" || nproc)" -o "$MODEL.part"
  mv "$MODEL.part" "$MODEL"
fi

bandwidth() {  # GB/s of the probe's 1- and 2-thread reads, or nothing without the benchmark binary
  [ -x "$probe" ] || return 0
  echo "memory probe ($1): $("$probe" --benchmark_filter=BM_ReadBandwidth 2>/dev/null | grep -o 'GB/s=[0-9.]*' | tr '\n' ' ')" >&2
}

[ "${SHORT:-0}" = 1 ] || bandwidth before
"$infer" serve-bench -m "$MODEL" --concurrency "$CONCURRENCY" --prompt-tokens "$PROMPT" --gen-tokens "$GEN" \
  --rounds "$ROUNDS" --repeats "$REPEATS" -t "$THREADS" --kv-type "$KV" "$@"
if [ -n "${LLAMA_BATCHED_BENCH:-}" ]; then
  # S_TG t/s is decode alone, all sequences together; llama.cpp needs flash attention for a quantised V.
  levels=$(tr -d ' ' <<<"$CONCURRENCY") most=$(tr ',' '\n' <<<"$CONCURRENCY" | sort -n | tail -1)
  fa=(); [ "$KV" = f16 ] || fa=(-fa)
  echo "llama-batched-bench ($LLAMA_BATCHED_BENCH), KV $KV:"
  "$LLAMA_BATCHED_BENCH" -m "$MODEL" -npp "$PROMPT" -ntg "$GEN" -npl "$levels" \
    -t "$([ "$THREADS" -gt 0 ] && echo "$THREADS" || nproc)" -ctk "$KV" -ctv "$KV" "${fa[@]}" \
    -c $((most * (PROMPT + GEN) + 256)) 2>/dev/null | grep -E '^\|'
fi
[ "${SHORT:-0}" = 1 ] || bandwidth after
