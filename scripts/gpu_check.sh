#!/usr/bin/env bash
# Verifies the CUDA backend on a machine with an NVIDIA GPU (issue 24's acceptance, as far as it is
# built): the GPU test suites (reference fidelity, stories260K's greedy ids, invariant 7, bert, the
# memory plan), compute-sanitizer memcheck on a short generation, and a table of prefill/decode speed on
# synthetic models (qwen3-0.6b, llama-3.2-1b, qwen3-4b in Q4_K_M and Q8_0) with the HBM share,
# streaming (qwen3-4b Q4_K_M with a quarter of its layers resident: output equal to resident, decode
# against the host-to-device bandwidth), and 8 concurrent sequences against one. Prints a summary table last and writes it as JSON.
#
# Usage: scripts/gpu_check.sh [BUILD_DIR]     (default build/release, built by scripts/setup.sh when absent)
# Environment: INFER_MODELS_DIR, INFER_REFERENCE_DIR, INFER_VECTORS_DIR as for the tests (default
# ../shared/...); GPU_CHECK_OUT (default BUILD_DIR/gpu_check) for the logs, the synthetic models and
# gpu_check.json; GPU_CHECK_FILTER (gtest filter of the suites, default *Cuda*); GPU_CHECK_SHAPES and
# GPU_CHECK_TYPES (default "qwen3-0.6b llama-3.2-1b qwen3-4b", "q4_k_m q8_0"; empty skips the table);
# LLAMA_BENCH: llama.cpp's llama-bench built with CUDA beside the project, run on the same files right
# after ours (its pp512/tg64 go in the table's last columns).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
source scripts/shared_dirs.sh
export INFER_BUILD_DIR=$build
[ -x "$build/src/cli/infer" ] || scripts/setup.sh release
out=${GPU_CHECK_OUT:-$build/gpu_check}
mkdir -p "$out"
infer=$build/src/cli/infer
tests=$build/tests/model/infer_model_tests
declare -A status
summary=()

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader || { echo "no GPU: nothing to check"; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)

echo "== GPU test suites (${GPU_CHECK_FILTER:-*Cuda*})"
"$tests" --gtest_filter="${GPU_CHECK_FILTER:-*Cuda*}" > "$out/tests.log" 2>&1
status[tests]=$?
grep -E "^\[(fidelity|greedy|bert|cuda)" "$out/tests.log"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/tests.log"
summary+=("tests: $(grep -E '^\[  PASSED' "$out/tests.log" | head -1 | sed 's/\[ *PASSED *\] *//'), failed $(grep -cE '^\[  FAILED  \] .*\(' "$out/tests.log")")

echo "== compute-sanitizer memcheck: a short generation"
if command -v compute-sanitizer > /dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 3 "$infer" generate -m "$INFER_MODELS_DIR/stories260K.gguf" \
    --device cuda -p "Once upon a time" -n 16 --temp 0 > "$out/memcheck.log" 2>&1
  status[memcheck]=$?
  grep -E "ERROR SUMMARY" "$out/memcheck.log"
  summary+=("memcheck: $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | sed 's/=* *//')")
else
  status[memcheck]=1
  summary+=("memcheck: compute-sanitizer not found")
fi

echo "== speed (synthetic models, $gpu)"
rows=()
for shape in ${GPU_CHECK_SHAPES-qwen3-0.6b llama-3.2-1b qwen3-4b}; do
  case $shape in llama*) vocab=ggml-vocab-llama-bpe.gguf ;; *) vocab=ggml-vocab-qwen2.gguf ;; esac
  for type in ${GPU_CHECK_TYPES-q4_k_m q8_0}; do
    f=$out/$shape-$type.gguf
    [ -s "$f" ] || "$infer" synth --like "$shape" --type "$type" --vocab "$INFER_VECTORS_DIR/$vocab" -t "$(nproc)" -o "$f" \
      > "$out/synth-$shape-$type.log" 2>&1 || { echo "synth $shape $type failed"; status[bench]=1; continue; }
    if "$infer" bench -m "$f" --device cuda -p 512 -n 64 -r 3 --json > "$out/bench-$shape-$type.json" 2> "$out/bench-$shape-$type.log"; then
      llama="- | -"
      if [ -n "${LLAMA_BENCH:-}" ]; then
        llama=$("$LLAMA_BENCH" -m "$f" -ngl 99 -p 512 -n 64 -r 3 -o json 2> "$out/llama-$shape-$type.log" | python3 -c '
import json, sys
runs = json.load(sys.stdin)
pp = [r["avg_ts"] for r in runs if r["n_prompt"] > 0]
tg = [r["avg_ts"] for r in runs if r["n_gen"] > 0]
print(f"{pp[0]:.1f} | {tg[0]:.1f}")') || llama="failed | failed"
      fi
      rows+=("$(python3 - "$out/bench-$shape-$type.json" "$shape" "$type" "$llama" <<'PY'
import json, sys
j = json.loads(open(sys.argv[1]).read())
print(f"| {sys.argv[2]} | {sys.argv[3]} | resident | {j['pp_tps']:.1f} | {j['tg_tps']:.1f} | {j['weight_bytes_per_token']/2**20:.0f} MiB | {j['tg_bandwidth_share']:.2f} | {j['hbm_bandwidth_gbs']:.0f} | {sys.argv[4]} |")
PY
)")
    else
      echo "bench $shape $type failed: $(tail -1 "$out/bench-$shape-$type.log")"
      status[bench]=1
    fi
  done
done
# Streaming: qwen3-4b Q4_K_M with a quarter of its layers resident (9 of 36), the rest streamed each
# pass: its greedy ids and top logits against the resident run's, and its decode speed against the
# host-to-device bandwidth over the bytes it streams a token.
big=$out/qwen3-4b-q4_k_m.gguf
if [ -s "$big" ]; then
  for g in auto 9; do
    "$infer" generate -m "$big" --device cuda --gpu-layers $g -p "The history of the city" -n 32 --temp 0 --json \
      --logits 8 > "$out/generate-$g.json" 2> "$out/generate-$g.log" || status[stream]=1
  done
  if python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(0 if a.get("ids") and a.get("ids")==b.get("ids") and a.get("logits")==b.get("logits") else 1)' \
      "$out/generate-auto.json" "$out/generate-9.json"; then
    summary+=("streaming (qwen3-4b q4_k_m, 9 of 36 layers resident): greedy ids and top-8 logits of 32 steps equal to resident")
  else
    status[stream]=1
    summary+=("streaming (qwen3-4b q4_k_m, 9 of 36 layers resident): output DIFFERS from resident")
  fi
  if "$infer" bench -m "$big" --device cuda --gpu-layers 9 -p 512 -n 64 -r 3 --json > "$out/bench-qwen3-4b-q4_k_m-streaming.json" \
      2> "$out/bench-streaming.log"; then
    rows+=("$(python3 - "$out/bench-qwen3-4b-q4_k_m-streaming.json" <<'PY'
import json, sys
j = json.loads(open(sys.argv[1]).read())
s = j["streamed_bytes"]
share = j["tg_tps"] * s / (j["h2d_bandwidth_gbs"] * 1e9) if s else 0
print(f"| qwen3-4b | q4_k_m | streaming 27/36 ({s/2**20:.0f} MiB a token) | {j['pp_tps']:.1f} | {j['tg_tps']:.1f} | {j['weight_bytes_per_token']/2**20:.0f} MiB | {share:.2f} of H2D {j['h2d_bandwidth_gbs']:.1f} GB/s | {j['hbm_bandwidth_gbs']:.0f} | - | - |")
PY
)")
  else
    echo "streaming bench failed: $(tail -1 "$out/bench-streaming.log")"
    status[stream]=1
  fi
fi
first=$out/qwen3-0.6b-q4_k_m.gguf
if [ -s "$first" ]; then
  "$infer" serve-bench -m "$first" --device cuda --concurrency 1,8 --prompt-tokens 64 --gen-tokens 64 --json \
    > "$out/serve-bench.json" 2> "$out/serve-bench.log" || status[serve]=1
fi

echo
echo "== summary ($gpu)"
for line in "${summary[@]}"; do echo "$line"; done
if [ ${#rows[@]} -gt 0 ]; then
  echo "| model | type | mode | pp512 tok/s | tg64 tok/s | weights read/token | tg share of HBM | HBM copy GB/s | llama.cpp pp512 | llama.cpp tg64 |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for r in "${rows[@]}"; do echo "$r"; done
fi
[ -s "$out/serve-bench.json" ] && python3 - "$out/serve-bench.json" <<'PY'
import json, sys
levels = {r["concurrency"]: r["decode_tps"] for r in json.load(open(sys.argv[1]))}
if 1 in levels and 8 in levels:
    print(f"qwen3-0.6b q4_k_m decode: 1 sequence {levels[1]:.1f} tok/s, 8 sequences {levels[8]:.1f} tok/s aggregate ({levels[8]/levels[1]:.2f}x)")
PY
python3 - "$out" "${status[tests]:-0}" "${status[memcheck]:-0}" "${status[bench]:-0}" "${status[serve]:-0}" "$gpu" <<'PY'
import glob, json, os, sys
out, t, m, b, s, gpu = sys.argv[1:]
bench = {os.path.basename(p)[6:-5]: json.load(open(p)) for p in sorted(glob.glob(out + "/bench-*.json")) if os.path.getsize(p)}
json.dump({"gpu": gpu, "tests_rc": int(t), "memcheck_rc": int(m), "bench_rc": int(b), "serve_rc": int(s), "bench": bench},
          open(out + "/gpu_check.json", "w"), indent=1)
PY
echo "logs and gpu_check.json in $out"
rc=0
for k in tests memcheck bench stream serve; do [ "${status[$k]:-0}" = 0 ] || rc=1; done
exit $rc
