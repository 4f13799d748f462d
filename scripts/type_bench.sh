#!/usr/bin/env bash
# Prefill and decode of every weight type on one model shape, as a markdown table under the CPU's name:
# per round and type, `infer bench` and (when LLAMA_BENCH names llama.cpp's llama-bench, built beside
# the project) llama-bench on the same file, one after the other. Columns: the batch kernel family
# that ran, pp ours / llama.cpp with the ratio, pp ÷ the same round's Q4_K_M pp, tg ours / llama.cpp.
# The files are random-weight GGUFs of the shape, made with `infer synth` when missing.
# Usage: scripts/type_bench.sh
#   env: BUILD_DIR (build/release), BENCH_DIR (build/bench-models), LIKE (llama-3.2-1b: llama.cpp
#        builds older than April 2025 read no qwen3), TYPES ("q4_k_m q5_k_m q8_0 q4_0 f16 bf16"; the
#        first is the ratio's base), ROUNDS (2), PP (512), TG (64), THREADS (2),
#        LLAMA_BENCH (path to llama-bench; unset: ours only), RUN (a prefix such as "taskset -c 2,3")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/release}
BENCH_DIR=${BENCH_DIR:-build/bench-models}
LIKE=${LIKE:-llama-3.2-1b}
TYPES=${TYPES:-q4_k_m q5_k_m q8_0 q4_0 f16 bf16}
ROUNDS=${ROUNDS:-2} PP=${PP:-512} TG=${TG:-64} THREADS=${THREADS:-2}
RUN=${RUN:-}
infer="$BUILD_DIR/src/cli/infer"
[ -x "$infer" ] || { echo "type_bench: $infer not built (bash scripts/setup.sh)" >&2; exit 1; }
if [ -n "${LLAMA_BENCH:-}" ] && [ ! -x "$LLAMA_BENCH" ]; then
  echo "type_bench: LLAMA_BENCH=$LLAMA_BENCH is not an executable" >&2
  exit 1
fi

mkdir -p "$BENCH_DIR"
for t in $TYPES; do
  f="$BENCH_DIR/$LIKE-$t.gguf"
  [ -f "$f" ] && continue
  echo "type_bench: making $f (infer synth)" >&2
  "$infer" synth --like "$LIKE" --type "$t" -o "$f.part"
  mv "$f.part" "$f"
done

# The first value of a JSON key in infer bench's one-line output: a number, or a string (str).
num() { grep -o "\"$1\":[-0-9.e+]*" | head -1 | cut -d: -f2 | awk '{ printf "%.1f", $1 }'; }
str() { grep -o "\"$1\":\"[^\"]*\"" | head -1 | cut -d: -f2- | tr -d '"'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'; }
# llama-bench's avg_ts column for its pp and tg tests, in that order.
llama_rates() {
  $RUN "$LLAMA_BENCH" -m "$1" -p "$PP" -n "$TG" -t "$THREADS" -r 1 -o csv 2>/dev/null |
    awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i ~ /avg_ts/) c = i; next } { gsub(/"/, "", $c); printf "%.1f ", $c }'
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
cpu=""
declare -A rows
for ((round = 1; round <= ROUNDS; ++round)); do
  base=""
  for t in $TYPES; do
    f="$BENCH_DIR/$LIKE-$t.gguf"
    if ! json=$($RUN "$infer" bench -m "$f" -p "$PP" -n "$TG" -t "$THREADS" -r 1 --json 2>"$log"); then
      cat "$log" >&2
      exit 1
    fi
    pp=$(printf '%s' "$json" | num pp_tps)
    tg=$(printf '%s' "$json" | num tg_tps)
    family=$(printf '%s' "$json" | str batch)
    cpu=$(printf '%s' "$json" | str cpu)
    [ -n "$base" ] || base=$pp
    lpp="" ltg="" pp_cell=$pp tg_cell=$tg
    if [ -n "${LLAMA_BENCH:-}" ]; then
      read -r lpp ltg < <(llama_rates "$f") || true
      pp_cell="$pp / ${lpp:--} ($(ratio "$pp" "${lpp:-0}")×)" tg_cell="$tg / ${ltg:--}"
    fi
    [ "$TG" -gt 0 ] || tg_cell="-"
    cell="$pp_cell|$(ratio "$pp" "$base")|$tg_cell"
    rows[$t]="${rows[$t]:+${rows[$t]};}$family|$cell"
    echo "type_bench: round $round $t: pp $pp tg $tg${LLAMA_BENCH:+, llama.cpp $lpp $ltg}" >&2
  done
done

echo "CPU: $cpu; $LIKE shape, $THREADS threads, pp$PP / tg$TG, $ROUNDS rounds (one cell a round)"
echo
vs=${LLAMA_BENCH:+ ours / llama.cpp}
echo "| type | batch kernels | pp$PP$vs${LLAMA_BENCH:+ (×)} | ours ÷ ${TYPES%% *} | tg$TG$vs |"
echo "|---|---|---|---|---|"
for t in $TYPES; do
  IFS=';' read -r -a cells <<< "${rows[$t]}"
  family="" pps="" rats="" tgs=""
  for c in "${cells[@]}"; do
    IFS='|' read -r fam p r g <<< "$c"
    family=$fam
    pps="${pps:+$pps, }$p" rats="${rats:+$rats, }$r" tgs="${tgs:+$tgs, }$g"
  done
  echo "| $t | \`$family\` | $pps | $rats | $tgs |"
done
